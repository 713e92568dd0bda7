package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/pipeline"
)

// settingFlags registers cmd's flags (persistent ones with persistent set) for the named
// execution settings, all when none is named, from pipeline's settings table: the name with
// '-' for '_', the type, the default and the usage line (pipeline.SettingUsage).
func settingFlags(cmd *cobra.Command, persistent bool, names ...string) {
	fl := cmd.Flags()
	if persistent {
		fl = cmd.PersistentFlags()
	}
	for _, ps := range pipeline.ExecutionSettings() {
		if len(names) > 0 && !slices.Contains(names, ps.Name) {
			continue
		}
		switch name, usage := flagName(ps.Name), pipeline.SettingUsage(ps); d := ps.Default.(type) {
		case int64:
			fl.Int(name, int(d), usage)
		case bool:
			fl.Bool(name, d, usage)
		case string:
			fl.String(name, d, usage)
		}
	}
}

func flagName(setting string) string { return strings.ReplaceAll(setting, "_", "-") }

// setFlags stores in e the execution settings whose flags on cmd were set, checked by the
// table as a job's are (bench's lists aside); each error names its flag.
func setFlags(cmd *cobra.Command, e *pipeline.Execution) []error {
	var errs []error
	for _, ps := range pipeline.ExecutionSettings() {
		f := cmd.Flags().Lookup(flagName(ps.Name))
		if f == nil || !f.Changed || ps.Kind == pipeline.Int && f.Value.Type() != "int" {
			continue
		}
		if err := e.SetText(ps.Name, f.Value.String()); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", f.Name, err))
		}
	}
	return errs
}

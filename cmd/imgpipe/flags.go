package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/pipeline"
)

// settingFlags registers cmd's flags (persistent ones with persistent set) for the named
// execution settings, all when none is named, from pipeline's settings table: the name with
// '-' for '_', the type, the default and the usage line (pipeline.SettingUsage) with the
// environment variable that sets it too (settingEnv).
func settingFlags(cmd *cobra.Command, persistent bool, names ...string) {
	fl := cmd.Flags()
	if persistent {
		fl = cmd.PersistentFlags()
	}
	for _, ps := range pipeline.ExecutionSettings() {
		if len(names) > 0 && !slices.Contains(names, ps.Name) {
			continue
		}
		name, usage := flagName(ps.Name), pipeline.SettingUsage(ps)+" [$"+settingEnv(ps.Name)+"]"
		switch d := ps.Default.(type) {
		case int64:
			fl.Int(name, int(d), usage)
		case bool:
			fl.Bool(name, d, usage)
		case string:
			fl.String(name, d, usage)
		}
		if ps.Kind == pipeline.Enum {
			registerEnum(cmd, name, ps.Values...)
		}
	}
}

// registerEnum makes shell completion offer values for the flag called name.
func registerEnum(cmd *cobra.Command, name string, values ...string) {
	// Only fails for a flag that does not exist: a mistake every CLI test would show.
	if err := cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)); err != nil {
		panic(err)
	}
}

func flagName(setting string) string { return strings.ReplaceAll(setting, "_", "-") }

// settingEnv is the environment variable of an execution setting: IMGPIPE_ and the name in
// capitals (IMGPIPE_DEVICE, IMGPIPE_ON_ERROR).
func settingEnv(setting string) string { return "IMGPIPE_" + strings.ToUpper(setting) }

// setFlags stores in e the execution settings given on cmd, checked by the table as a job's
// are (bench's lists aside); each error names its flag or variable. A flag wins over its
// environment variable, which wins over the job file: the variables set a user's standing
// preferences, the job its own, the command line this run's.
func setFlags(cmd *cobra.Command, e *pipeline.Execution) []error {
	var errs []error
	for _, ps := range pipeline.ExecutionSettings() {
		f := cmd.Flags().Lookup(flagName(ps.Name))
		if f == nil || ps.Kind == pipeline.Int && f.Value.Type() != "int" {
			continue
		}
		from, val := "--"+f.Name, f.Value.String()
		if !f.Changed {
			env := settingEnv(ps.Name)
			v, ok := os.LookupEnv(env)
			if !ok || v == "" {
				continue
			}
			from, val = "$"+env, v
		}
		if err := e.SetText(ps.Name, val); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", from, err))
		}
	}
	return errs
}

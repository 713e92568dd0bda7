package queue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/imgpipe/imgpipe/pipeline"
)

// A job's record names its execution settings as a YAML job does ("pinned_mb"), in the order
// of pipeline's settings table. Records written before that named them as the Go fields of
// pipeline.Execution ("PinnedMB"); they still read, since a setting's field is its name
// without underscores, case aside.

// jobFields is Job without its JSON methods: what encoding/json writes for its fields, exec
// under the Go field names. The digest hashes this form, which every record had before exec
// took the settings' names, so that a job keeps its digest, and so its default name and a
// second submit's match, across that change.
type jobFields Job

// storedJob is a job's record: its fields, with exec in the settings' names (the shallower
// Exec hides jobFields').
type storedJob struct {
	jobFields
	Exec json.RawMessage `json:"exec"`
}

// MarshalJSON implements json.Marshaler: the job's record, as Submit stores it.
func (j Job) MarshalJSON() ([]byte, error) {
	exec, err := marshalExec(j.Exec)
	if err != nil {
		return nil, err
	}
	return json.Marshal(storedJob{jobFields(j), exec})
}

// UnmarshalJSON implements json.Unmarshaler: it reads a record of either naming.
func (j *Job) UnmarshalJSON(data []byte) error {
	var rec storedJob
	if err := json.Unmarshal(data, &rec); err != nil {
		return err
	}
	*j = Job(rec.jobFields)
	if len(rec.Exec) == 0 {
		return nil // no exec: the zero settings, as before
	}
	return unmarshalExec(&j.Exec, rec.Exec)
}

// execField is one execution setting and its field in pipeline.Execution.
type execField struct {
	name  string // as the settings table and YAML write it
	index int    // the field's index in pipeline.Execution
}

// fieldKey is what a setting's name and its field's name have in common: "pinned_mb" and
// "PinnedMB" both give "pinnedmb".
func fieldKey(name string) string { return strings.ToLower(strings.ReplaceAll(name, "_", "")) }

// execFields pairs every execution setting, in table order, with its field. A setting
// without a field, or a field without a setting, is a bug that the first use reports.
var execFields = sync.OnceValue(func() []execField {
	t := reflect.TypeFor[pipeline.Execution]()
	byKey := map[string]int{}
	for i := range t.NumField() {
		byKey[fieldKey(t.Field(i).Name)] = i
	}
	settings := pipeline.ExecutionSettings()
	if len(settings) != t.NumField() {
		panic(fmt.Sprintf("queue: %d execution settings but %d fields in pipeline.Execution", len(settings), t.NumField()))
	}
	fields := make([]execField, len(settings))
	for k, ps := range settings {
		i, ok := byKey[fieldKey(ps.Name)]
		if !ok {
			panic("queue: execution setting " + ps.Name + " has no field in pipeline.Execution")
		}
		fields[k] = execField{ps.Name, i}
	}
	return fields
})

// marshalExec writes e as a record's exec object: every setting by name, in table order.
func marshalExec(e pipeline.Execution) (json.RawMessage, error) {
	v := reflect.ValueOf(e)
	var b bytes.Buffer
	b.WriteByte('{')
	for k, f := range execFields() {
		val, err := json.Marshal(v.Field(f.index).Interface())
		if err != nil {
			return nil, fmt.Errorf("exec: %s: %w", f.name, err)
		}
		name, _ := json.Marshal(f.name) // a string always marshals
		if k > 0 {
			b.WriteByte(',')
		}
		b.Write(name)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// unmarshalExec reads a record's exec object into e, its keys the settings' names or, as
// older records have them, the fields' names; a setting it leaves out keeps its zero value.
// A key that names no setting of this version fails the record rather than be dropped.
func unmarshalExec(e *pipeline.Execution, data []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	byKey := map[string]execField{}
	for _, f := range execFields() {
		byKey[fieldKey(f.name)] = f
	}
	v := reflect.ValueOf(e).Elem()
	seen := map[string]string{} // setting name → the key that set it
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		f, ok := byKey[fieldKey(key)]
		if !ok {
			return fmt.Errorf("exec: %q is no execution setting of this imgpipe (was the job submitted by another version?)", key)
		}
		if other, dup := seen[f.name]; dup {
			return fmt.Errorf("exec: %q and %q are both setting %s", other, key, f.name)
		}
		seen[f.name] = key
		if err := json.Unmarshal(obj[key], v.Field(f.index).Addr().Interface()); err != nil {
			return fmt.Errorf("exec: %s: %w", key, err)
		}
	}
	return nil
}

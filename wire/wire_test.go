package wire_test

import (
	"fmt"
	"reflect"
	"testing"

	"enrichd/server"
	"enrichd/wire"
	"enrichd/worker"
)

// wiredApart are the worker's fields that are not serve's settings but what wire.New
// tells the Pool of the server.
var wiredApart = map[string]bool{"Metrics": true, "RowRequest": true, "SetReplicas": true}

// Every setting of the background is one of serve's, of the same name and type, and
// WorkerConfig passes it on: a field added to worker.Config and forgotten here, or
// read under another name, would leave the workers on their default.
func TestWorkerConfigPassesEverySettingOn(t *testing.T) {
	var cfg server.Config
	sv := reflect.ValueOf(&cfg).Elem()
	wt := reflect.TypeOf(worker.Config{})
	for i := range wt.NumField() {
		f := wt.Field(i)
		if wiredApart[f.Name] {
			continue
		}
		sf := sv.FieldByName(f.Name)
		if !sf.IsValid() || sf.Type() != f.Type {
			t.Errorf("worker.Config.%s (%s) is no field of server.Config of that type", f.Name, f.Type)
			continue
		}
		sf.Set(nonZero(t, f.Type, i))
	}
	got := reflect.ValueOf(wire.WorkerConfig(cfg))
	for i := range wt.NumField() {
		name := wt.Field(i).Name
		if wiredApart[name] || !sv.FieldByName(name).IsValid() {
			continue
		}
		if !reflect.DeepEqual(got.Field(i).Interface(), sv.FieldByName(name).Interface()) {
			t.Errorf("WorkerConfig does not pass %s on", name)
		}
	}
	if wire.WorkerConfig(cfg).RowRequest == nil {
		t.Error("WorkerConfig leaves the batch feeder without the API's reading of a row")
	}
}

// nonZero is a value of type typ that differs from the zero value and, for numbers,
// from the other fields' (seed).
func nonZero(t *testing.T, typ reflect.Type, seed int) reflect.Value {
	v := reflect.New(typ).Elem()
	switch typ.Kind() {
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(seed + 1))
	case reflect.Pointer:
		v.Set(reflect.New(typ.Elem()))
	case reflect.Slice:
		v.Set(reflect.MakeSlice(typ, 1, 1))
	case reflect.Map:
		v.Set(reflect.MakeMap(typ))
		v.SetMapIndex(reflect.New(typ.Key()).Elem(), reflect.New(typ.Elem()).Elem())
	case reflect.Struct:
		if typ.NumField() == 0 {
			t.Fatalf("%s has no field to set", typ)
		}
		for i := range typ.NumField() {
			if f := v.Field(i); f.CanSet() {
				f.Set(nonZero(t, f.Type(), seed))
				return v
			}
		}
		t.Fatalf("%s has no exported field to set", typ)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.String:
		v.SetString(fmt.Sprint("setting ", seed))
	default:
		t.Fatalf("no value for a %s", typ)
	}
	return v
}

// The workers' defaults, which apply to a zero field, are serve's.
func TestWorkerDefaultsAreServes(t *testing.T) {
	want := wire.WorkerConfig(server.DefaultConfig())
	def := worker.DefaultConfig()
	dv, wv := reflect.ValueOf(def), reflect.ValueOf(want)
	for i := range dv.NumField() {
		name := dv.Type().Field(i).Name
		if dv.Field(i).IsZero() || name == "Logger" {
			continue // no default; the logger is slog's default in both
		}
		if !reflect.DeepEqual(dv.Field(i).Interface(), wv.Field(i).Interface()) {
			t.Errorf("worker.DefaultConfig().%s is %v, server.DefaultConfig's %v", name, dv.Field(i).Interface(), wv.Field(i).Interface())
		}
	}
}

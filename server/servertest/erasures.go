package servertest

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"enrichd/enrich"
	"enrichd/server"

	"github.com/matryer/is"
)

// Rosa is a person on the fake network whose every identifying byte can be looked for
// in the database files: her name, profile, address and headline.
var Rosa = struct{ Name, Slug, URL, Email, Headline string }{
	"Rosa Quintero", "rosa-quintero", "https://www.linkedin.com/in/rosa-quintero", "rosa.quintero@acme.com", "Chief Rocket Scientist at Acme",
}

// RosaSays are the strings of hers nothing may keep once she is erased.
var RosaSays = []string{Rosa.Name, "Quintero", Rosa.Slug, Rosa.Email, "Chief Rocket Scientist"}

// RosaNetwork puts Acme and Rosa Quintero, who works there, on the fake network.
func RosaNetwork(e *Env) {
	AcmeNetwork(e)
	p := Employee(Rosa.Slug, "Rosa", "Quintero", AcmeURL, "Chief Rocket Scientist", "Lisbon", "PT", false)
	p.Headline = enrich.Ptr(Rosa.Headline)
	e.Net.AddPerson(p)
}

// LookUpRosaEverywhere looks Rosa up by profile through a person Loop (whose receiver
// gets the event), by address directly, and in a batch, and watches her through the
// Loop. It returns the Loop's id and secret and the tasks' ids.
func LookUpRosaEverywhere(t *testing.T, e *Env, rcv *Receiver) (loopID, secret string, tasks []string) {
	t.Helper()
	is := is.New(t)
	loopID, secret = e.CreateLoop("CRM people", rcv.Srv.URL+"/hook", "person")
	run := e.Do("POST", "/v1/loops/"+loopID+"/run", map[string]string{"networkUrl": Rosa.URL})
	is.Equal(e.WaitSettled(run.Str("task.id")).Str("task.status"), "succeeded")
	got := rcv.Wait(t, 1)
	is.True(bytes.Contains(got[0].Body, []byte(Rosa.Name))) // the receiver holds her
	_, byEmail := e.EmailLookup(Rosa.Email)
	is.Equal(byEmail.Str("task.status"), "succeeded")
	is.Equal(byEmail.Str("data.network_url"), Rosa.URL)
	b := e.UploadCSV("networkUrl,note\n"+Rosa.URL+",met at the fair\n", "")
	is.Equal(b.Status, http.StatusAccepted)
	done := e.WaitBatchDone(b.Str("data.id"))
	is.Equal(Count(done, "succeeded"), 1)
	w := e.CreateWatch(map[string]any{"object_type": "person", "networkUrl": Rosa.URL, "loop_id": loopID})
	is.True(w.Str("data.id") != "")
	list := e.Do("GET", "/v1/tasks?pageSize=100", nil)
	for _, task := range list.Get("data").([]any) {
		tasks = append(tasks, task.(map[string]any)["id"].(string))
	}
	return loopID, secret, tasks
}

// WaitErasureComplete polls an erasure until it is complete.
func (e *Env) WaitErasureComplete(id string) *Response {
	e.T.Helper()
	deadline := time.Now().Add(SettleWithin)
	for {
		r := e.Do("GET", "/v1/erasures/"+id, nil)
		if r.Status != http.StatusOK {
			e.T.Fatalf("GET erasure: %d %s", r.Status, r.Raw)
		}
		if r.Get("data.completed_at") != nil {
			return r
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("the erasure did not complete: %s", r.Raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ErasuresOften completes erasures, as maintenance does, every 50 ms.
func ErasuresOften(cfg *server.Config) { cfg.MaintenanceInterval = 50 * time.Millisecond }

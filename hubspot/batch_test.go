package hubspot

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"enrichd/secret"
	"enrichd/store"
	"enrichd/store/storetest"

	"github.com/matryer/is"
)

// panickingNetwork is a network whose every request panics inside the client.
type panickingNetwork struct{}

func (panickingNetwork) RoundTrip(*http.Request) (*http.Response, error) { panic("a transport bug") }

// A panic while a batch is written (which the sender recovers from, failing the
// batch's attempts) leaves none of the objects' locks held: were one left, every later
// delivery about an object of its stripe, of any Loop, would wait on it for good.
func TestAPanicInABatchLeavesNoObjectLocked(t *testing.T) {
	is := is.New(t)
	db := storetest.Open(t, filepath.Join(t.TempDir(), "enrichd.db"), storetest.NewClock(time.Now().UTC()))
	box, _, err := secret.LoadOrCreate(filepath.Join(t.TempDir(), "secret-key"))
	is.NoErr(err)
	sealed, err := box.Seal([]byte("pat-na1-test"), store.HubSpotTokenLabel("loop-1"))
	is.NoErr(err)
	dl := &Deliverer{DB: db, Box: box, BaseURL: "http://hubspot.invalid", HTTP: &http.Client{Transport: panickingNetwork{}}}
	dispatch := func(id, email string) *store.Dispatch {
		return &store.Dispatch{ID: id, LoopID: "loop-1", Event: store.EventTaskSucceeded, Kind: store.KindHubSpot, ObjectType: "person",
			HubSpot: store.HubSpotToken{Sealed: sealed},
			Payload: []byte(`{"event":"task.succeeded","task":{"input":{"email":"` + email + `"}},"data":{"full_name":"Jane Doe"}}`)}
	}

	func() {
		defer func() { is.True(recover() != nil) }() // the sender's recovery, here
		dl.DeliverBatch(t.Context(), []*store.Dispatch{dispatch("d-1", "jane@acme.com"), dispatch("d-2", "bob@acme.com")})
	}()
	for i := range dl.stripes {
		is.True(dl.stripes[i].TryLock()) // no stripe left held
		dl.stripes[i].Unlock()
	}
}

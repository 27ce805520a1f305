package hubspot

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net/http"
	"slices"
	"strings"

	"enrichd/store"
	"enrichd/webhook"
)

// DeliverBatch makes one attempt of each of several task.succeeded deliveries of one
// Loop due at once, through HubSpot's batch endpoints: the objects read with one
// batch/read (by the ids kept, then by email; companies by one search and a batch/read
// of CompanyKeyProperty), the absent ones made with one batch/create and the others
// filled with one batch/update, under the same blank-only rule as one at a time. Each
// delivery has its own outcome: an input HubSpot refuses in a multi-status answer
// fails alone, and a batch HubSpot refuses whole for what one of its inputs holds
// (a property the portal lacks, a contact it holds already, a value it does not take)
// is written again one object at a time, so that only that input fails.
func (dl *Deliverer) DeliverBatch(ctx context.Context, ds []*store.Dispatch) []webhook.Outcome {
	outs := make([]webhook.Outcome, len(ds))
	var jobs []*job
	var at []int    // the delivery of each job
	var alone []int // deliveries written one at a time, after the batch
	keys := map[string]bool{}
	for i, d := range ds {
		w, ev, failed := dl.open(d)
		switch {
		case failed != nil:
			outs[i] = *failed
			continue
		case ev.Event != store.EventTaskSucceeded:
			alone = append(alone, i)
			continue
		}
		j, skip, err := w.prepare(ctx, ev)
		switch {
		case err != nil:
			outs[i] = failure(err)
		case j == nil:
			outs[i] = webhook.Outcome{Status: http.StatusOK, Summary: skip}
		case keys[j.key]:
			// A second result about one object is written after the first, which it
			// then finds.
			alone = append(alone, i)
		default:
			keys[j.key] = true
			jobs, at = append(jobs, j), append(at, i)
		}
	}
	if len(jobs) == 1 {
		alone = append(alone, at[0])
	} else if len(jobs) > 1 {
		settled := func() []*webhook.Outcome {
			// Deferred, so that a panic the sender recovers from leaves no stripe held.
			defer dl.lockAll(ds[0].LoopID, slices.Collect(maps.Keys(keys)))()
			return dl.writeBatch(ctx, jobs)
		}()
		for n, out := range settled {
			if out == nil {
				alone = append(alone, at[n])
			} else {
				outs[at[n]] = *out
			}
		}
	}
	slices.Sort(alone)
	for _, i := range alone {
		outs[i] = dl.Deliver(ctx, ds[i])
	}
	return outs
}

// lockAll holds the stripes of the Loop's object keys, each once and in order, so that
// two batches, or a batch and one delivery, wait on each other rather than deadlock.
func (dl *Deliverer) lockAll(loopID string, keys []string) func() {
	var stripes []int
	for _, key := range keys {
		h := fnv.New32a()
		h.Write([]byte(loopID + "\x00" + key))
		stripes = append(stripes, int(h.Sum32()%uint32(len(dl.stripes))))
	}
	slices.Sort(stripes)
	stripes = slices.Compact(stripes)
	for _, s := range stripes {
		dl.stripes[s].Lock()
	}
	return func() {
		for _, s := range stripes {
			dl.stripes[s].Unlock()
		}
	}
}

// oneAtATime reports whether HubSpot refused a batch for what one of its inputs holds
// (400, 404, 409 and the like), or a search found more objects holding its keys than
// are read (where one at a time the first found is enough), which the inputs written
// one at a time tell apart. Its
// 401 and 403 (the token), 429 and 5xx (HubSpot) fail every input, each retried on
// its schedule.
func oneAtATime(err error) bool {
	if errors.Is(err, errSearchCrowded) {
		return true
	}
	s := StatusOf(err)
	return s >= 400 && s < 500 && s != http.StatusUnauthorized && s != http.StatusForbidden && s != http.StatusTooManyRequests
}

// writeBatch writes the jobs, each about another object, and says how each went; nil
// for a job to write one at a time.
func (dl *Deliverer) writeBatch(ctx context.Context, jobs []*job) []*webhook.Outcome {
	outs := make([]*webhook.Outcome, len(jobs))
	pending := func() (n []int) {
		for i := range jobs {
			if outs[i] == nil {
				n = append(n, i)
			}
		}
		return n
	}
	single := &webhook.Outcome{} // a marker: written one at a time
	// settle ends the jobs not settled yet with err: one at a time, or failed.
	settle := func(which []int, err error) {
		for _, i := range which {
			if oneAtATime(err) {
				outs[i] = single
			} else {
				out := failure(err)
				outs[i] = &out
			}
		}
	}
	first := jobs[0]
	c, objects, props := first.w.c, first.objects, first.props

	// Found by the id kept or created a moment ago, while it holds the key.
	var ids []string
	for _, j := range jobs {
		if id := j.knownID(); id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 {
		byID, err := c.BatchRead(ctx, objects, "", ids, props)
		if err != nil {
			settle(pending(), err)
			return done(outs, single)
		}
		for _, j := range jobs {
			if o := byID[j.knownID()]; j.holdsKey(o) {
				j.found = o
			}
		}
	}
	missing := func() (keys []string) {
		for _, j := range jobs {
			if j.found == nil {
				keys = append(keys, j.key)
			}
		}
		return keys
	}
	byKey := func(found map[string]*Object) {
		for _, j := range jobs {
			if o := found[j.key]; j.found == nil && o != nil {
				j.found = o
			}
		}
	}
	if keys := missing(); len(keys) > 0 && objects == "contacts" {
		// A contact's email is a unique property: read by it, a contact is found the
		// moment it is created, where the search shows it only seconds later.
		found, err := c.BatchRead(ctx, objects, "email", keys, props)
		if err != nil {
			settle(pending(), err)
			return done(outs, single)
		}
		byKey(found)
	}
	if keys := missing(); len(keys) > 0 && objects == "companies" {
		// A company's domain is not unique in HubSpot: searched for, then read by
		// the unique property enrichd sets on the companies it creates.
		found, err := c.SearchIn(ctx, objects, "domain", keys, props)
		if err != nil {
			settle(pending(), err)
			return done(outs, single)
		}
		byKey(found)
		if keys := missing(); len(keys) > 0 {
			keyed, err := first.companyKeyed(ctx)
			if err != nil {
				settle(pending(), err)
				return done(outs, single)
			}
			for _, j := range jobs {
				j.keyed = keyed
			}
			if keyed {
				found, err := c.BatchRead(ctx, objects, CompanyKeyProperty, keys, props)
				if err != nil {
					settle(pending(), err)
					return done(outs, single)
				}
				byKey(found)
			}
		}
	}

	// Absent: created, in one call.
	var creating []int
	var inputs []BatchInput
	created := map[int]map[string]string{}
	for i, j := range jobs {
		if j.found == nil {
			created[i] = j.createProps()
			creating = append(creating, i)
			inputs = append(inputs, BatchInput{Properties: created[i], ObjectWriteTraceID: j.w.d.ID})
		}
	}
	if len(inputs) > 0 {
		objs, failed, err := c.BatchCreate(ctx, objects, first.keyProp, inputs)
		for _, i := range creating {
			j := jobs[i]
			switch o, ferr := objs[j.w.d.ID], failed[j.w.d.ID]; {
			case o != nil:
				summary, wrote := j.created(o, created[i], "")
				outs[i] = &webhook.Outcome{Status: http.StatusOK, Summary: summary, Wrote: wrote}
			case ferr != nil:
				out := failure(ferr)
				outs[i] = &out
			default: // in a call that failed whole
				settle([]int{i}, err)
			}
		}
	}

	// Found: filled, in one call; those with nothing blank settled at once.
	var filling []int
	inputs = nil
	fills := map[int]*fill{}
	for i, j := range jobs {
		if j.found == nil {
			continue
		}
		f := j.plan()
		if len(f.props) == 0 {
			summary, wrote := j.filled(f, "")
			outs[i] = &webhook.Outcome{Status: http.StatusOK, Summary: summary, Wrote: wrote}
			continue
		}
		fills[i] = f
		filling = append(filling, i)
		inputs = append(inputs, BatchInput{ID: j.found.ID, Properties: f.props, ObjectWriteTraceID: j.w.d.ID})
	}
	if len(inputs) > 0 {
		objs, failed, err := c.BatchUpdate(ctx, objects, inputs)
		for _, i := range filling {
			j := jobs[i]
			switch ferr := failed[j.w.d.ID]; {
			case objs[j.w.d.ID] != nil:
				summary, wrote := j.filled(fills[i], "")
				outs[i] = &webhook.Outcome{Status: http.StatusOK, Summary: summary, Wrote: wrote}
			case ferr != nil:
				out := failure(ferr)
				outs[i] = &out
			default: // in a call that failed whole
				settle([]int{i}, err)
			}
		}
	}
	return done(outs, single)
}

// done is outs with the jobs marked to be written one at a time as nil.
func done(outs []*webhook.Outcome, single *webhook.Outcome) []*webhook.Outcome {
	for i, o := range outs {
		if o == single {
			outs[i] = nil
		}
	}
	return outs
}

// SearchIn finds the objects whose property is one of values, reading props of each
// (POST /crm/v3/objects/{objects}/search, one filter IN, page after page), by the
// value each holds, lower case; the first object HubSpot answers for a value.
func (c *Client) SearchIn(ctx context.Context, objects, property string, values, props []string) (map[string]*Object, error) {
	out := map[string]*Object{}
	for chunk := range slices.Chunk(values, MaxBatch) {
		after := ""
		for page := 0; ; page++ {
			if page == maxSearchPages {
				return nil, fmt.Errorf("%w: more than %d %s holding these %d values of %s", errSearchCrowded, page*maxSearchPage, objects, len(chunk), property)
			}
			body := map[string]any{
				"filterGroups": []any{map[string]any{"filters": []any{map[string]any{"propertyName": property, "operator": "IN", "values": chunk}}}},
				"properties":   props,
				"limit":        maxSearchPage,
			}
			if after != "" {
				body["after"] = after
			}
			var ans struct {
				Results []Object `json:"results"`
				Paging  *struct {
					Next *struct {
						After string `json:"after"`
					} `json:"next"`
				} `json:"paging"`
			}
			if err := c.do(ctx, http.MethodPost, "/crm/v3/objects/"+objects+"/search", body, &ans); err != nil {
				return nil, err
			}
			for i := range ans.Results {
				o := &ans.Results[i]
				if v := strings.ToLower(str(o.Properties[property])); v != "" && out[v] == nil {
					out[v] = o
				}
			}
			if ans.Paging == nil || ans.Paging.Next == nil || ans.Paging.Next.After == "" {
				break
			}
			after = ans.Paging.Next.After
		}
	}
	return out, nil
}

// maxSearchPage is the most results HubSpot's search answers in one page.
const maxSearchPage = 200

// maxSearchPages bounds the pages read of one search.
const maxSearchPages = 5

// errSearchCrowded is a search that found more objects than maxSearchPages hold.
var errSearchCrowded = errors.New("HubSpot's search found too many objects")

var _ webhook.BatchDestination = (*Deliverer)(nil)

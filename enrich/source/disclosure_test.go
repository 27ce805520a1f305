package source_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"enrichd/enrich"
	"enrichd/enrich/source"
)

// The identifiers the test asks with, each found in what is sent by a part no other
// holds.
var probes = []struct {
	sent  source.Sent
	value string // as asked
	seen  string // what shows it was sent, whatever form the adapter sends it in
}{
	{source.SentDomain, "probe-co.test", "probe-co.test"},
	{source.SentCompanyURL, "https://www.linkedin.com/company/probe-company", "company/probe-company"},
	{source.SentPersonURL, "https://www.linkedin.com/in/probe-person", "in/probe-person"},
	{source.SentEmail, "jo.probe@probe-mail.test", "jo.probe@probe-mail.test"},
	{source.SentNames, "probename", "probename"},
}

func probe(s source.Sent) string {
	for _, p := range probes {
		if p.sent == s {
			return p.value
		}
	}
	panic(s)
}

// askEverything asks src every question it can answer, with the probes.
func askEverything(src enrich.Source) {
	ctx := context.Background()
	src.CompanyByDomain(ctx, nil, probe(source.SentDomain))
	src.CompanyByURL(ctx, nil, probe(source.SentCompanyURL))
	src.PersonByURL(ctx, nil, probe(source.SentPersonURL))
	if m, ok := src.(enrich.EmailMatcher); ok {
		m.PersonByEmail(ctx, nil, probe(source.SentEmail))
	}
	if s, ok := src.(enrich.StaffSearcher); ok {
		s.SearchStaff(ctx, nil, enrich.StaffQuery{Company: &enrich.Company{Name: "Probe", Domain: enrich.Ptr(probe(source.SentDomain)),
			NetworkURL: enrich.Ptr(probe(source.SentCompanyURL))}, Names: []string{probe(source.SentNames)}, Limit: 5})
	}
}

// sentIn is which probes the texts hold, in the order of probes.
func sentIn(texts []string) []source.Sent {
	var out []source.Sent
	for _, p := range probes {
		if slices.ContainsFunc(texts, func(s string) bool { return strings.Contains(s, p.seen) }) {
			out = append(out, p.sent)
		}
	}
	return out
}

// What the record of processing says each vendor receives is what its adapter sends:
// every question asked, the identifiers found in its requests' paths, queries and
// bodies are those its Disclosure lists, no more and no fewer.
func TestDisclosuresAreWhatIsSent(t *testing.T) {
	for _, name := range []string{"enrichlayer", "pdl", "apollo"} {
		t.Run(name, func(t *testing.T) {
			f := newFakeVendor(t, nil) // knows nobody: 404 to everything
			cfg := vendorConfig(f, "probe-key-0000", &bytes.Buffer{})
			var src enrich.Source
			var err error
			switch name {
			case "enrichlayer":
				src, err = source.NewEnrichLayer(cfg)
			case "pdl":
				src, err = source.NewPDL(cfg)
			default:
				src, err = source.NewApollo(cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			askEverything(src)
			var texts []string
			f.mu.Lock()
			for i, r := range f.got {
				query, _ := url.QueryUnescape(r.URL.RawQuery)
				texts = append(texts, r.URL.Path+"?"+query+"\n"+f.bodies[i])
			}
			f.mu.Unlock()
			want := source.Disclosures[name]
			if got := sentIn(texts); !slices.Equal(got, want.Sends) {
				t.Errorf("%s sent %v, its disclosure says %v; requests:\n%s", name, got, want.Sends, strings.Join(texts, "\n"))
			}
			if want.Recipient == "" {
				t.Errorf("%s sends to nobody, by its disclosure", name)
			}
		})
	}

	t.Run("web", func(t *testing.T) {
		var mu sync.Mutex
		var hosts []string
		s := newSites(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hosts = append(hosts, r.Host+r.URL.String())
			mu.Unlock()
			page(w, `<title>Acme</title>`)
		})
		web := s.web(true)
		ctx := context.Background()
		web.CompanyByDomain(ctx, nil, "acme.test")
		web.CompanyByURL(ctx, nil, probe(source.SentCompanyURL))
		web.PersonByURL(ctx, nil, probe(source.SentPersonURL))
		mu.Lock()
		defer mu.Unlock()
		// The domain asked is the site's own name, and nothing else is asked of anyone.
		if !slices.Equal(hosts, []string{"acme.test/"}) || !slices.Equal(source.Disclosures["web"].Sends, []source.Sent{source.SentDomain}) {
			t.Errorf("the web source asked %q; its disclosure says %v", hosts, source.Disclosures["web"].Sends)
		}
	})

	// Every name serve accepts has a disclosure; those that read the database or make
	// up their answers send nothing.
	for _, name := range []string{"dataset", "sim", "web", "enrichlayer", "pdl", "apollo"} {
		d, ok := source.Disclosures[name]
		if !ok {
			t.Errorf("%s has no disclosure", name)
		}
		if (name == "dataset" || name == "sim") != (d.Recipient == "" && len(d.Sends) == 0) {
			t.Errorf("%s: disclosure %+v", name, d)
		}
	}
}

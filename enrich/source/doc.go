// Package source owns enrichd's adapters to the outside world, each an enrich.Source
// the pipeline asks in the order configured:
//
//   - Web (`web`): a company's own website, fetched through netguard's client (public
//     addresses only, redirects bounded), read for its name, description, JSON-LD
//     Organization and its link to the network's company page;
//   - EnrichLayer (`enrichlayer`), PDL (`pdl`) and Apollo (`apollo`): data vendors'
//     HTTP APIs, each keeping the same discipline (rate limit, concurrency cap,
//     jittered retries inside the caller's deadline, the API key out of logs and
//     errors) and mapping the vendor's records onto the API's Company and Person;
//   - Sim (`sim`): a deterministic synthetic network for the demo, the benchmark and
//     load tests; never real data.
//
// The web and vendor adapters count what they send upstream (enrich.Metered), and
// each request again in the enrich.Tally the ask comes with, where a vendor's request
// is put on the organization's books before it is sent. The
// `dataset` source is not here: it reads the imported records with SQL, in store.
package source

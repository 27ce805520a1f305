package source

// What each source sends out of the installation about the subjects it is asked for:
// who receives it and which of their identifiers. The record of processing (`enrichd
// privacy report`, docs/privacy.md) prints it; TestDisclosuresAreWhatIsSent holds each
// adapter to its list by what it puts in its requests.

// Sent is a kind of identifier a source sends out.
type Sent string

const (
	SentDomain     Sent = "domain"      // a company's domain
	SentCompanyURL Sent = "company_url" // a company's page on the network
	SentPersonURL  Sent = "person_url"  // a person's profile URL
	SentEmail      Sent = "email"       // a work email address, whole
	// SentNames are the name words the local part of an address may stand for, sent
	// with the company searched (its domain or page) to list its staff by name.
	SentNames Sent = "names"
)

// Describe says what is sent in words.
func (s Sent) Describe() string {
	switch s {
	case SentDomain:
		return "company domains"
	case SentCompanyURL:
		return "company pages"
	case SentPersonURL:
		return "profile URLs"
	case SentEmail:
		return "work email addresses"
	case SentNames:
		return "name words an address may stand for, with the company searched"
	}
	return string(s)
}

// Disclosure is what one source sends out: Recipient, who receives it ("" when
// nothing leaves the installation), and Sends, which identifiers of the subjects.
type Disclosure struct {
	Recipient string
	Sends     []Sent
}

// Disclosures are the sources' by name, for every name serve's --sources accepts.
var Disclosures = map[string]Disclosure{
	"dataset": {},
	"sim":     {},
	// The site at the domain asked, found through the system's resolver. The company
	// page a site links to is asked of the other sources, as their own lookups are.
	"web":         {Recipient: "each company's own website", Sends: []Sent{SentDomain}},
	"enrichlayer": {Recipient: "Enrich Layer", Sends: []Sent{SentDomain, SentCompanyURL, SentPersonURL, SentNames}},
	"pdl":         {Recipient: "People Data Labs", Sends: []Sent{SentDomain, SentCompanyURL, SentPersonURL, SentEmail, SentNames}},
	// Apollo finds companies by domain only: a company page is never sent to it.
	"apollo": {Recipient: "Apollo", Sends: []Sent{SentDomain, SentPersonURL, SentEmail}},
}

package enrich

// Host is the network's host these URLs are normalized to: NetworkHost lower-cased,
// DefaultNetworkHost when it is empty. Sources use it to write the network's URLs.
func (n Normalizer) Host() string { return n.host() }

package server

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/julienschmidt/httprouter"
)

// Router holds the routes of a listener as they are written (routes.go, and the
// dashboard's Mount) and serves them through httprouter. It adds two rules to
// httprouter's:
//
//   - A path's :id is an object's id, a uuid as the store writes it, and nothing else
//     is: a literal segment such as /v1/watches/import is never taken for an id, and
//     an id that cannot name an object never reaches the store (where PostgreSQL
//     would refuse a string that is not UTF-8 as an error of its own). A request whose
//     path is a route's but for such an id, and no other route's, goes to that route
//     marked (notAnID): its guard, once it knows the client, answers its object not
//     found (RefusedID) without running the handler.
//   - A request no route takes is answered from the routes as written: 405 with the
//     methods its path takes in Allow, or 404 when it takes none. So Allow is true
//     for every path, where httprouter's would list a method whose route matches the
//     path's shape but not the path.
//
// httprouter cannot hold a literal segment beside a parameter of the same method at
// the same place (POST /v1/watches/import beside POST /v1/watches/:id/run): such a
// literal is registered with httprouter as the parameter, and the routes that share
// a registration are told apart by their own patterns.
type Router struct {
	routes []*route
}

// route is a route as written: httprouter's syntax, :name a segment, *name the rest.
type route struct {
	method, path string
	segments     []string
	handler      http.Handler
}

// IDParam is the path parameter that is an object's id.
const IDParam = "id"

// Handler adds a route: httprouter's signature, so that routes.go and the dashboard's
// Mount read as they would with httprouter itself.
func (rt *Router) Handler(method, path string, h http.Handler) {
	rt.routes = append(rt.routes, &route{method: method, path: path, segments: strings.Split(path, "/")[1:], handler: h})
}

// IsID reports whether s can be the id of an object: a UUID written as the store
// writes its ids (lowercase, with hyphens). Every id a client sends, in a path or in a
// tool's arguments, is checked by it before the store is asked.
func IsID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// matches reports whether the route takes path.
func (r *route) matches(path string) bool { return r.matchesShape(path, true) }

// matchesShape reports whether path has the route's shape: its id an id when strict,
// any segment otherwise.
func (r *route) matchesShape(path string, strict bool) bool {
	rest, ok := strings.CutPrefix(path, "/")
	if !ok {
		return false
	}
	for i, seg := range r.segments {
		if strings.HasPrefix(seg, "*") {
			return true // httprouter's catch-all: the rest, whatever it is
		}
		part, more, found := strings.Cut(rest, "/")
		switch {
		case seg == ":"+IDParam && strict:
			if !IsID(part) {
				return false
			}
		case strings.HasPrefix(seg, ":"):
			if part == "" {
				return false
			}
		case part != seg:
			return false
		}
		last := i == len(r.segments)-1
		if last != !found {
			return false // the path is longer, or shorter, than the route
		}
		rest = more
	}
	return true
}

// Allowed lists the methods whose routes take path, sorted: what Allow says.
func (rt *Router) Allowed(path string) []string {
	var allow []string
	for _, r := range rt.routes {
		if r.matches(path) && !slices.Contains(allow, r.method) {
			allow = append(allow, r.method)
		}
	}
	slices.Sort(allow)
	return allow
}

// Routes lists the routes as "METHOD path", in the order they were added.
func (rt *Router) Routes() []string {
	out := make([]string, len(rt.routes))
	for i, r := range rt.routes {
		out[i] = r.method + " " + r.path
	}
	return out
}

// handler serves the routes; unrouted answers a request no route takes, given the
// methods its path does take (none: there is nothing there).
func (rt *Router) handler(unrouted func(w http.ResponseWriter, r *http.Request, allow []string)) http.Handler {
	hr := httprouter.New()
	hr.RedirectTrailingSlash = false
	hr.RedirectFixedPath = false
	hr.HandleOPTIONS = false
	refuse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		unrouted(w, r, rt.Allowed(r.URL.Path))
	})
	hr.NotFound, hr.MethodNotAllowed = refuse, refuse

	// The routes that share a registration with httprouter, in the order written.
	shared := map[string][]*route{}
	var order []string
	for _, r := range rt.routes {
		key := r.method + " " + rt.registeredPath(r)
		if _, ok := shared[key]; !ok {
			order = append(order, key)
		}
		shared[key] = append(shared[key], r)
	}
	for _, key := range order {
		method, path, _ := strings.Cut(key, " ")
		routes := shared[key]
		hr.Handler(method, path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for _, route := range routes {
				if route.matches(r.URL.Path) {
					route.handler.ServeHTTP(w, r)
					return
				}
			}
			if allow := rt.Allowed(r.URL.Path); len(allow) == 0 {
				for _, route := range routes {
					if route.matchesShape(r.URL.Path, false) {
						route.handler.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), notAnIDKey{}, true)))
						return
					}
				}
			}
			refuse(w, r)
		}))
	}
	return hr
}

type notAnIDKey struct{}

// notAnID reports whether the router took the request to its route though its :id is
// no id.
func notAnID(r *http.Request) bool {
	v, _ := r.Context().Value(notAnIDKey{}).(bool)
	return v
}

// registeredPath is the path r is registered with in httprouter: its own, but for a
// literal segment where another route of its method has a parameter after the same
// segments, which takes the parameter's place.
func (rt *Router) registeredPath(r *route) string {
	segs := slices.Clone(r.segments)
	for i, seg := range segs {
		if strings.HasPrefix(seg, ":") || strings.HasPrefix(seg, "*") {
			continue
		}
		for _, o := range rt.routes {
			if o.method == r.method && len(o.segments) > i && strings.HasPrefix(o.segments[i], ":") && slices.Equal(o.segments[:i], segs[:i]) {
				segs[i] = o.segments[i]
				break
			}
		}
	}
	return "/" + strings.Join(segs, "/")
}

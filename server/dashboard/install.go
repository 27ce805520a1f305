package dashboard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"enrichd/enrich"
	"enrichd/server"
	"enrichd/store"
)

// The first-start page is where the link `enrichd serve` prints on a database with no
// user leads: it creates the first organization and its admin, and signs the admin in.
// The link is checked when the page is shown and used up when the form is sent.
func handleInstallPage(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := server.Clip(r.URL.Query().Get("token"), 100)
		if err := s.db.CheckInstallLink(r.Context(), token); err != nil {
			s.dashError(w, r, err)
			return
		}
		s.render(w, r, http.StatusOK, "install", view{Title: "Welcome", Data: installForm{Token: token, Min: minPassword}})
	})
}

// installForm is what the first-start form shows, again with the error when it is
// refused; passwords are never sent back.
type installForm struct {
	Token, Org, Email, Error string
	Min                      int
}

func handleInstall(s *Dashboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := parseForm(w, r, maxPassword+1); err != nil {
			s.dashError(w, r, err)
			return
		}
		f := installForm{Token: server.Clip(r.PostFormValue("token"), 100), Min: minPassword,
			Org: strings.TrimSpace(r.PostFormValue("org")), Email: store.NormalEmail(r.PostFormValue("email"))}
		ctx := r.Context()
		if err := s.db.CheckInstallLink(ctx, f.Token); err != nil {
			s.dashError(w, r, err)
			return
		}
		password := r.PostFormValue("password")
		for _, err := range []error{store.CheckOrgName(f.Org), store.CheckEmail(f.Email), checkNewPassword(password, r.PostFormValue("confirm"))} {
			var e *enrich.Error
			if errors.As(err, &e) {
				f.Error = e.Message
				s.render(w, r, http.StatusBadRequest, "install", view{Title: "Welcome", Data: f})
				return
			}
		}
		var hash string
		var err error
		if slotErr := s.dashboard.withHashSlot(ctx, func() { hash, err = hashPassword(password) }); slotErr != nil {
			err = slotErr
		}
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		u, err := s.db.Install(ctx, server.ActingOf(ctx), f.Token, store.NewInstall{OrgName: f.Org, Email: f.Email, PasswordHash: hash})
		if err != nil {
			s.dashError(w, r, err)
			return
		}
		server.SetRequestOrg(r, u.OrgID)
		if err := s.endSessionOf(r); err != nil {
			s.dashError(w, r, err)
			return
		}
		token, err := s.db.CreateSession(ctx, server.ActingOf(ctx), u.ID, s.cfg.SessionMax)
		if err != nil {
			// The admin exists: signing in by hand still works.
			s.dashError(w, r, err)
			return
		}
		s.setSessionCookie(w, r, token, int(s.cfg.SessionMax.Seconds()))
		// The notice is signed for the admin the next page is shown to, not for this
		// request's nobody.
		msg := "Welcome: " + u.OrgName + " and its admin " + u.Email + " are set up. The list below is what is left to do."
		q := url.Values{"notice": {msg}, "sig": {noticeSig(u, "/dashboard/", msg)}}
		http.Redirect(w, r, "/dashboard/?"+q.Encode(), http.StatusSeeOther)
	})
}

// faviconICO is the dashboard's icon (the one its pages embed as SVG: a blue rounded
// square with a white E) as a 32×32 ICO, for the browsers and tools that ask for
// /favicon.ico. It is drawn here rather than kept as a binary file.
var faviconICO = sync.OnceValue(func() []byte {
	const size, scale, samples = 32, 2.0, 4 // 16 SVG units, 4×4 samples a pixel
	blue := color.NRGBA{0x34, 0x51, 0xb2, 0xff}
	// The E of the SVG path, as rectangles in its 16-unit grid: x0, y0, x1, y1.
	letter := [][4]float64{{5, 4, 11, 6}, {5, 4, 7, 12}, {5, 7, 10, 9}, {5, 10, 11, 12}}
	inSquare := func(x, y float64) bool { // the rect of 16 with rx 3
		const r = 3.0
		cx, cy := min(max(x, r), 16-r), min(max(y, r), 16-r)
		return (x-cx)*(x-cx)+(y-cy)*(y-cy) <= r*r
	}
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	for py := range size {
		for px := range size {
			var cover, white float64
			for sy := range samples {
				for sx := range samples {
					x := (float64(px) + (float64(sx)+0.5)/samples) / scale
					y := (float64(py) + (float64(sy)+0.5)/samples) / scale
					if !inSquare(x, y) {
						continue
					}
					cover++
					for _, l := range letter {
						if x >= l[0] && x < l[2] && y >= l[1] && y < l[3] {
							white++
							break
						}
					}
				}
			}
			if cover == 0 {
				continue
			}
			mix := func(c uint8) uint8 { return uint8((float64(c)*(cover-white) + 255*white) / cover) }
			img.SetNRGBA(px, py, color.NRGBA{mix(blue.R), mix(blue.G), mix(blue.B), uint8(255 * cover / (samples * samples))})
		}
	}
	var pngBuf bytes.Buffer
	if err := png.Encode(&pngBuf, img); err != nil {
		panic(err)
	}
	// An ICO of one PNG image: the directory, its one entry, the image.
	var ico bytes.Buffer
	binary.Write(&ico, binary.LittleEndian, struct {
		Reserved, Type, Count uint16
		Width, Height         uint8
		Colors, Reserved2     uint8
		Planes, BitCount      uint16
		Bytes, Offset         uint32
	}{Type: 1, Count: 1, Width: size, Height: size, Planes: 1, BitCount: 32, Bytes: uint32(pngBuf.Len()), Offset: 22})
	ico.Write(pngBuf.Bytes())
	return ico.Bytes()
})

func handleFavicon() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/x-icon")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		w.Write(faviconICO())
	})
}

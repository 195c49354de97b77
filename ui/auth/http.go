package auth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"governor.dev/governor/rules/versioning"
)

// CookieName is the session cookie. The __Host- prefix makes browsers
// refuse it unless it is Secure, for this host only and for every path.
const CookieName = "__Host-governor_session"

// CSRFField and CSRFHeader carry the CSRF token of state-changing requests.
const (
	CSRFField  = "csrf"
	CSRFHeader = "X-CSRF-Token"
)

// PasswordPath is where a user with a one-time password is sent.
const PasswordPath = "/account/password"

// LogoutPath ends the session; a user with a one-time password may use it
// too, without choosing a new password first.
const LogoutPath = "/logout"

type ctxKey struct{}

// FromContext returns the request's principal, nil if anonymous.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(ctxKey{}).(*Principal)
	return p
}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// ErrorWriter writes an error response.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, err error)

// Middleware resolves the principal of each request (bearer token or session
// cookie; none for anonymous requests) and enforces CSRF tokens on
// state-changing requests of sessions. A store failure is written with
// onError; an invalid token or session is treated as anonymous so that
// Require can send the user to the login page.
func (m *Manager) Middleware(onError ErrorWriter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var (
				p   *Principal
				err error
			)
			if h := r.Header.Get("Authorization"); h != "" {
				bearer, ok := bearerToken(h)
				if !ok {
					onError(w, r, fmt.Errorf("%w: Authorization must be a Bearer token", ErrUnauthenticated))
					return
				}
				p, err = m.TokenPrincipal(r.Context(), bearer)
				if err != nil {
					// A bad token is never silently anonymous.
					onError(w, r, err)
					return
				}
			} else if c, cerr := r.Cookie(CookieName); cerr == nil {
				p, err = m.SessionPrincipal(r.Context(), c.Value)
				if errors.Is(err, ErrUnauthenticated) {
					ClearCookie(w)
					p, err = nil, nil
				}
				if err != nil {
					onError(w, r, err)
					return
				}
			}
			if p != nil && p.Degraded && !safeMethod(r.Method) {
				onError(w, r, fmt.Errorf("%w: the accounts database is unavailable; changes are refused until it is back", ErrUnavailable))
				return
			}
			if p != nil && p.Session != nil && !safeMethod(r.Method) {
				submitted := r.Header.Get(CSRFHeader)
				if submitted == "" {
					// A form over the body limit is that (413), not a
					// missing CSRF token.
					var mbe *http.MaxBytesError
					if err := r.ParseForm(); errors.As(err, &mbe) {
						onError(w, r, fmt.Errorf("auth: reading the form: %w", err))
						return
					}
					submitted = r.PostFormValue(CSRFField)
				}
				if err := CheckCSRF(p, submitted); err != nil {
					onError(w, r, err)
					return
				}
			}
			next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
		})
	}
}

// bearerToken returns the credentials of a Bearer Authorization header; the
// scheme name is case-insensitive (RFC 9110, section 11.1).
func bearerToken(h string) (string, bool) {
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(cred, " "), true
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// Require lets through principals holding any of roles (any principal when
// roles is empty). Anonymous browser GETs are redirected to the login page;
// other anonymous requests get ErrUnauthenticated. A user with a one-time
// password is sent to PasswordPath from a page, and gets ErrForbidden from
// anything else (the API included).
func Require(onError ErrorWriter, roles ...versioning.Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := FromContext(r.Context())
			// Browsers are redirected; API calls (a page's script or
			// automation) get an error document they can read.
			page := (r.Method == http.MethodGet || r.Method == http.MethodHead) && !strings.HasPrefix(r.URL.Path, "/api/")
			if p == nil {
				if page {
					http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
					return
				}
				onError(w, r, ErrUnauthenticated)
				return
			}
			if p.User.MustChange && p.Session != nil && r.URL.Path != PasswordPath && r.URL.Path != LogoutPath {
				if page {
					http.Redirect(w, r, PasswordPath, http.StatusSeeOther)
					return
				}
				onError(w, r, fmt.Errorf("%w: choose a new password first", ErrForbidden))
				return
			}
			if p.User.MustChange && p.Token != nil {
				onError(w, r, fmt.Errorf("%w: the user must choose a new password first", ErrForbidden))
				return
			}
			if len(roles) > 0 && !p.Has(roles...) {
				onError(w, r, ForbiddenError(roles))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// ForbiddenError names the roles an action needs.
func ForbiddenError(roles []versioning.Role) error {
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	return fmt.Errorf("%w: this needs one of the roles: %s", ErrForbidden, strings.Join(names, ", "))
}

// SetCookie writes the session cookie: Secure, HttpOnly, SameSite=Strict,
// expiring with the session.
func SetCookie(w http.ResponseWriter, s *Session, now time.Time) {
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: s.ID, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode,
		MaxAge: int(s.ExpiresAt.Sub(now).Seconds()),
	})
}

// ClearCookie removes the session cookie.
func ClearCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

// ClientAddr is the address of the client that sent r (the login
// throttle's key): the host part of r.RemoteAddr or, when that is one of
// Options.TrustedProxies, the rightmost X-Forwarded-For address that is not
// (the leftmost if every one is: all hops were trusted). Entries a client
// put in the header before the proxies appended theirs are never believed.
func (m *Manager) ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if len(m.o.TrustedProxies) == 0 || !m.trusted(host) {
		return host
	}
	var hops []string
	for _, h := range r.Header.Values("X-Forwarded-For") {
		for f := range strings.SplitSeq(h, ",") {
			hops = append(hops, strings.TrimSpace(f))
		}
	}
	client := host
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			break // a malformed hop: believe nothing before it
		}
		client = a.Unmap().String()
		if !m.trusted(client) {
			break
		}
	}
	return client
}

func (m *Manager) trusted(host string) bool {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range m.o.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Package assets holds the web UI's static files (CSS, JavaScript, icons),
// embedded into the binary so that `go build` needs nothing else. Handler
// serves them under /assets/ with long-lived caching; file names are stable,
// so a page links them with a ?v= query of the build's content hash.
package assets

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
)

//go:embed static
var files embed.FS

// FS returns the static files, rooted at their directory.
func FS() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded directory always exists
	}
	return sub
}

// Version is a short hash of every embedded file, for cache busting.
func Version() string {
	h := sha256.New()
	_ = fs.WalkDir(FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(FS(), path)
		h.Write([]byte(path))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Handler serves the files; mount it with http.StripPrefix("/assets", ...).
func Handler() http.Handler {
	fsrv := http.FileServerFS(FS())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=86400")
		fsrv.ServeHTTP(w, r)
	})
}

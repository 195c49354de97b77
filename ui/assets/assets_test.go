package assets_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/ui/assets"
)

func TestServesEmbeddedFiles(t *testing.T) {
	h := http.StripPrefix("/assets", assets.Handler())
	for path, ctype := range map[string]string{"/assets/app.css": "text/css", "/assets/app.js": "javascript", "/assets/favicon.svg": "image/svg+xml"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		require.Equal(t, http.StatusOK, w.Code, path)
		require.Contains(t, w.Header().Get("Content-Type"), ctype, path)
		require.Equal(t, "public, max-age=86400", w.Header().Get("Cache-Control"))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/assets/nope.js", nil))
	require.Equal(t, http.StatusNotFound, w.Code)
	require.Len(t, assets.Version(), 12)
}

// TestScriptNeedsNoUnsafeCSP: the script uses no eval-like constructs the
// strict policy would block.
func TestScriptNeedsNoUnsafeCSP(t *testing.T) {
	b, err := fs.ReadFile(assets.FS(), "app.js")
	require.NoError(t, err)
	for _, bad := range []string{"eval(", "new Function", "setTimeout(\"", "document.write"} {
		require.False(t, strings.Contains(string(b), bad), bad)
	}
}

package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/config"
)

// A refused receiver URL is named by its mask: url.Parse's errors and "has no
// host" quote the whole value, credentials included.
func TestParseErrorsDoNotEchoReceiverSecrets(t *testing.T) {
	tests := []struct{ name, receiver, secret string }{
		{"pagerduty url userinfo", `"pagerduty": {"routing_key": "k", "url": "https://user:pa55word@events.example.com:bad/"}`, "pa55word"},
		{"webhook url without host", `"webhook": {"url": "https:///hook?token=s3cr3t"}`, "s3cr3t"},
		{"slack url without host", `"slack": {"url": "https:///services/T0/B0/s3cr3t"}`, "s3cr3t"},
		{"alertmanager url userinfo", `"alertmanager": {"url": "http://u:pa55word@am:port/"}`, "pa55word"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse([]byte(`{"receivers": [{"name": "r", ` + tt.receiver + `}]}`))
			require.ErrorIs(t, err, alerts.ErrInvalid)
			require.NotContains(t, err.Error(), tt.secret)
			require.Contains(t, err.Error(), config.MaskPrefix)
			require.Contains(t, err.Error(), "receivers[0]")
		})
	}
}

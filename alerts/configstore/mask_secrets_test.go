package configstore_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/config"
	"governor.dev/governor/alerts/configstore"
)

const pdURLDoc = `{"receivers": [{"name": "pager", "pagerduty": {"routing_key": "R0UTINGKEY-secret",
  "url": "https://user:pa55word@events.example.com/v2/enqueue?token=qu3rytoken"}}]}`

// PagerDuty's optional events URL may carry credentials (user info, a query
// token): it is masked as the other URLs are, keeping its host.
func TestMaskHidesThePagerDutyURL(t *testing.T) {
	masked, err := configstore.Mask(pdURLDoc)
	require.NoError(t, err)
	require.NotContains(t, masked, "pa55word")
	require.NotContains(t, masked, "qu3rytoken")
	require.Contains(t, masked, `"url": "<masked:events.example.com>"`)
	back, err := configstore.Unmask(masked, pdURLDoc)
	require.NoError(t, err)
	require.Equal(t, pdURLDoc, back)
}

func TestSummarizeHidesThePagerDutyURL(t *testing.T) {
	c, err := config.Parse([]byte(pdURLDoc))
	require.NoError(t, err)
	s := configstore.Summarize(c)
	require.Equal(t, "routing key <masked> via <masked:events.example.com>", s.Receivers[0].Target)
}

// Two receivers swap names: each mask now stands under the other's name.
// The mask says which secret it hides (its host); it keeps a saved secret
// only when it is the mask of that secret.
func TestUnmaskRefusesAMaskOfAnotherReceiversSecret(t *testing.T) {
	base := `{"receivers": [{"name": "a", "webhook": {"url": "https://a.example/tokA"}},
	  {"name": "b", "webhook": {"url": "https://b.example/tokB"}}], "routes": [{"receiver": "a"}]}`
	masked, err := configstore.Mask(base)
	require.NoError(t, err)
	swapped := strings.NewReplacer(`"name": "a"`, `"name": "b"`, `"name": "b"`, `"name": "a"`).Replace(masked)
	_, err = configstore.Unmask(swapped, base)
	require.ErrorIs(t, err, alerts.ErrInvalid)
	require.ErrorContains(t, err, "receivers[0].webhook.url")
	// A mask edited by hand is not a mask of the saved secret either.
	edited := strings.Replace(masked, "<masked:a.example>", "<masked:elsewhere.example>", 1)
	_, err = configstore.Unmask(edited, base)
	require.ErrorIs(t, err, alerts.ErrInvalid)
}

// A secret that merely starts like a mask is still a secret.
func TestMaskHidesASecretThatLooksLikeAMask(t *testing.T) {
	doc := `{"receivers": [{"name": "m", "email": {"smarthost": "mail:25", "from": "a@b.c", "to": ["d@e.f"],
	  "username": "u", "password": "<masked-hunter2>"}}]}`
	masked, err := configstore.Mask(doc)
	require.NoError(t, err)
	require.NotContains(t, masked, "hunter2")
	back, err := configstore.Unmask(masked, doc)
	require.NoError(t, err)
	require.Equal(t, doc, back)
}

// Keeping a masked secret while sending it elsewhere would hand the saved
// secret to the new destination: the routing key to another events URL,
// the SMTP password to another relay.
func TestUnmaskRefusesToSendAKeptSecretToANewDestination(t *testing.T) {
	tests := []struct{ name, base, from, to string }{
		{"pagerduty url", pdURLDoc, `"url": "<masked:events.example.com>"`, `"url": "https://collector.example/"`},
		{"email smarthost", `{"receivers": [{"name": "m", "email": {"smarthost": "mail:25", "from": "a@b.c",
		  "to": ["d@e.f"], "username": "u", "password": "pw"}}]}`, `"mail:25"`, `"relay.example:25"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			masked, err := configstore.Mask(tt.base)
			require.NoError(t, err)
			edited := strings.Replace(masked, tt.from, tt.to, 1)
			require.NotEqual(t, masked, edited)
			_, err = configstore.Unmask(edited, tt.base)
			require.ErrorIs(t, err, alerts.ErrInvalid)
		})
	}
}

package app

import (
	"fmt"
	"os"

	alertsconfig "governor.dev/governor/alerts/config"
	"governor.dev/governor/engine/config"
)

// LoadAlerts reads and validates the alerting document the configuration
// names (alerts.config_file, GOVERNOR_ALERTS_CONFIG or -alerts-config);
// nil without one. The error names the key, the file and the bad field.
func LoadAlerts(c config.Alerts) (*alertsconfig.Config, error) {
	if c.ConfigFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(c.ConfigFile)
	if err != nil {
		return nil, fmt.Errorf("%w: alerts.config_file: %w", config.ErrInvalid, err)
	}
	ac, err := alertsconfig.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%w: alerts.config_file %s: %w", config.ErrInvalid, c.ConfigFile, err)
	}
	return ac, nil
}

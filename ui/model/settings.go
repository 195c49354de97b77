package model

import (
	"context"

	"governor.dev/governor/alerts/configstore"
	"governor.dev/governor/rules/versioning"
)

// AlertRouting holds the versions of the alerting document (receivers,
// routes, rules) that admins edit on the settings page;
// *configstore.Store implements it. The newest saved version supersedes the
// engine's configuration file.
type AlertRouting interface {
	// Latest returns the newest version; alerts.ErrNotFound if none.
	Latest(ctx context.Context) (configstore.Version, error)
	// Get returns version n; alerts.ErrNotFound if it does not exist.
	Get(ctx context.Context, n int64) (configstore.Version, error)
	// List returns up to limit versions, newest first.
	List(ctx context.Context, limit int) ([]configstore.Version, error)
	// ListPage returns a page of versions, newest first, numbered below
	// o.Before when it is positive.
	ListPage(ctx context.Context, o configstore.ListOptions) ([]configstore.Version, error)
	// Save validates and stores a new version with its audit entry (one
	// transaction).
	Save(ctx context.Context, r configstore.SaveRequest) (configstore.Version, error)
	// Rollback stores an earlier version's document, its own secrets
	// included, as the new version r.Base+1, with its audit entry;
	// configstore.ErrConflict when r.Base is not the newest any more.
	Rollback(ctx context.Context, r configstore.RollbackRequest) (configstore.Version, error)
}

// ConfigBand returns the engine's configured auto-apply band of a service:
// the band in force while the service's policy sets none, and whether the
// configuration makes the service manual.
type ConfigBand func(service string) (band versioning.AutoApplyBand, manual bool)

// ActionAlertConfig is the audit action of a saved alerting configuration;
// its detail holds the version number and comment.
const ActionAlertConfig = configstore.AuditAction

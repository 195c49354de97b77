package auth

import (
	"context"

	"governor.dev/governor/rules/versioning"
)

// The audit actions of user management through the UI.
const (
	ActionUserCreate versioning.Action = "user_create"
	ActionUserRoles  versioning.Action = "user_roles"
	ActionUserDelete versioning.Action = "user_delete"
	// ActionPasswordChange: a user chose a new password (ChangePassword).
	ActionPasswordChange versioning.Action = "password_change"
)

// CreateUserAs is CreateUser done by the admin by, recorded in the audit
// log with the new user's name and roles (never the password).
func (m *Manager) CreateUserAs(ctx context.Context, by *Principal, name, password string, roles []versioning.Role, mustChange bool) (User, error) {
	u, err := m.CreateUser(ctx, name, password, roles, mustChange)
	if err == nil {
		m.audit(ctx, actorOf(by), ActionUserCreate, detailJSON("user", u.Name, "roles", versioning.JoinRoles(u.Roles)))
	}
	return u, err
}

// SetRolesAs is SetRoles done by the admin by, recorded in the audit log
// with the roles before and after.
func (m *Manager) SetRolesAs(ctx context.Context, by *Principal, name string, roles []versioning.Role) error {
	before, err := m.User(ctx, name)
	if err != nil {
		return err
	}
	if err := m.SetRoles(ctx, name, roles); err != nil {
		return err
	}
	m.audit(ctx, actorOf(by), ActionUserRoles, detailJSON("user", name, "from", versioning.JoinRoles(before.Roles), "to", versioning.JoinRoles(roles)))
	return nil
}

// DeleteUserAs is DeleteUser done by the admin by, recorded in the audit
// log.
func (m *Manager) DeleteUserAs(ctx context.Context, by *Principal, name string) error {
	if err := m.DeleteUser(ctx, name); err != nil {
		return err
	}
	m.audit(ctx, actorOf(by), ActionUserDelete, detailJSON("user", name))
	return nil
}

// actorOf is the audit log's actor for p ("unknown" for nil).
func actorOf(p *Principal) versioning.Actor {
	if p == nil {
		return versioning.Actor{}
	}
	return p.Actor()
}

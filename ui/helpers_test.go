package ui_test

import "governor.dev/governor/ui/auth"

func principal(u auth.User) *auth.Principal { return &auth.Principal{User: u, Roles: u.Roles} }

// Package auth is who may use Governor's web UI and JSON API, and what they
// may do.
//
// Users are local accounts with bcrypt password hashes and roles taken from
// package versioning (viewer, operator, approver, admin; roles do not imply
// each other). Passwords are at most 72 bytes, all that bcrypt reads; a
// longer one is refused when set and never matches at login. A browser logs
// in and gets a session: a random 256-bit id in a Secure, HttpOnly,
// SameSite=Strict cookie, stored only as its SHA-256, with a fixed lifetime
// (Options.SessionTTL), an idle expiry (Options.SessionIdle) and a fresh id
// at every login. Changing roles or deleting a user ends the user's
// sessions (deleting also removes their tokens). Changing a password ends
// every session of the user, so a stolen cookie stops working; the session
// it was made from goes on under a fresh id and CSRF token that
// ChangePassword returns for the cookie (audited, ActionPasswordChange).
// API tokens survive a password change unless it is made with
// ChangePasswordRevokingTokens, which revokes the user's active tokens in
// the same transaction (a token minted from a stolen session stops working
// too, and a session the change ended mints none after it, even for a
// request it authenticated before); the password page offers that, checked by default, and lists the
// tokens that would otherwise stay valid. Each session carries a CSRF
// token that every state-changing form or fetch must echo (field "csrf" or
// header X-CSRF-Token); net/http's CrossOriginProtection refuses cross-origin
// browser requests in front of that.
//
// Automation uses API tokens ("gov_<id>_<secret>", shown once, stored as a
// SHA-256 hash and compared in constant time) sent as "Authorization: Bearer
// ...". A token's scopes are role names; the token acts with the roles its
// user holds now that its scopes also name, so a token never grants more
// than its user has and loses a role the moment its user does. Every token
// expires: created without a lifetime it gets Options.TokenTTL (90 days),
// and one over Options.TokenMaxTTL (365 days) is refused. Tokens created
// without an expiry before that was required keep working until revoked;
// New logs how many there are and the account page flags them
// (Token.NeverExpires). Bearer requests need no CSRF
// token: a browser never attaches them by itself.
//
// Logins are throttled per user name and per client address with the SDK's
// keyed token buckets (package governor.dev/governor/sdk/ratelimit), and
// password changes per user name at the same rate; the client address is
// taken from X-Forwarded-For only behind Options.TrustedProxies, and an IPv6
// client is its /64. An address over its limit touches no name's bucket, so
// a throttled client cannot push other users' spent buckets out. While a
// name's bucket is spent, the addresses the user logged in from in the last
// 30 days (remembered in memory) still get through within their own limit,
// so someone guessing a name cannot shut its owner out for as long as they
// keep guessing. Every
// login, failure and logout is written to the rules audit log through
// versioning.Auditor.RecordAudit, except that of the throttled attempts of a
// client address only the first in a minute is (the others cost the client
// nothing, and would grow the log as fast as it posts).
//
// User names are unique ignoring case, as approvals compare people
// (versioning.SamePerson): with "alice" there, "Alice" is refused
// (ErrExists). A database that held such pairs before migration 00301 keeps
// them; new clashes are still refused.
//
// No account ships with a default password: EnsureAdmin creates the first
// admin with a random one-time password that must be changed at first login.
// It is also the way back from a database with users but no admin (from
// before the guard below): at start, the configured admin is promoted, or
// created with a one-time password, and the recovery audited.
//
// No change may leave the system without an admin: taking the admin role
// from, or deleting, the only admin left is refused (ErrLastAdmin), checked
// and changed atomically so that two admins demoting each other at once
// cannot both succeed.
//
// Storage is the rules database (SQLite or PostgreSQL, migrations 00300-00399).
package auth

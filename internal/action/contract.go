// Package action is the engine's side of the action contract: the [Catalog] of actions by name
// and [Safe], the one recoverer of calls into actions. The contract itself — [Action], [Spec],
// [Output], [Task], the error classes — is the public package
// github.com/sluice-project/sluice/action; the names here are aliases of it, so the built-in
// actions and an embedder's actions implement one and the same contract.
package action

import (
	"time"

	pub "github.com/sluice-project/sluice/action"
)

// The contract's types, aliases of package github.com/sluice-project/sluice/action's.
type (
	Action         = pub.Action
	Spec           = pub.Spec
	SettingType    = pub.SettingType
	Setting        = pub.Setting
	SettingError   = pub.SettingError
	Item           = pub.Item
	Task           = pub.Task
	Child          = pub.Child
	Output         = pub.Output
	Resumer        = pub.Resumer
	DomainWrite    = pub.DomainWrite
	PermanentError = pub.PermanentError
	SnoozeError    = pub.SnoozeError
)

// The setting types a [Setting] can declare.
const (
	TypeString   = pub.TypeString
	TypeInt      = pub.TypeInt
	TypeNumber   = pub.TypeNumber
	TypeBool     = pub.TypeBool
	TypeDuration = pub.TypeDuration
	TypeStrings  = pub.TypeStrings
	TypeObject   = pub.TypeObject
	TypeAny      = pub.TypeAny
)

// Resume is [pub.Resume].
func Resume(out Output) int { return pub.Resume(out) }

// Permanent is [pub.Permanent].
func Permanent(err error) error { return pub.Permanent(err) }

// Permanentf is [pub.Permanentf].
func Permanentf(format string, args ...any) error { return pub.Permanentf(format, args...) }

// IsPermanent is [pub.IsPermanent].
func IsPermanent(err error) bool { return pub.IsPermanent(err) }

// Snooze is [pub.Snooze].
func Snooze(d time.Duration) error { return pub.Snooze(d) }

// AsSnooze is [pub.AsSnooze].
func AsSnooze(err error) (time.Duration, bool) { return pub.AsSnooze(err) }

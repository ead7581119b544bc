package cli

import (
	"context"
)

func runIngest(ctx context.Context, e *env, args []string) error    { return usagef("not yet") }
func runDocuments(ctx context.Context, e *env, args []string) error { return usagef("not yet") }
func runDoctor(ctx context.Context, e *env, args []string) error    { return usagef("not yet") }
func benchIngest(ctx context.Context, e *env, args []string) error  { return usagef("not yet") }

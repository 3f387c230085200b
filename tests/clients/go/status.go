package main

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
)

// StepError names the call that failed.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return e.Step + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

func step(name string, err error) error {
	if err == nil {
		return nil
	}
	return &StepError{Step: name, Err: err}
}

// describe renders a gRPC failure as "<step>: <CODE> <reason>: <message>", the reason read
// from the google.rpc.ErrorInfo in the status details.
func describe(err error) string {
	prefix := ""
	var failed *StepError
	if errors.As(err, &failed) {
		prefix = failed.Step + ": "
		err = failed.Err
	}
	st, ok := status.FromError(err)
	if !ok {
		return prefix + err.Error()
	}
	reason := "(no ErrorInfo)"
	for _, detail := range st.Details() {
		if info, ok := detail.(*errdetails.ErrorInfo); ok {
			reason = info.GetReason()
		}
	}
	return fmt.Sprintf("%s%s %s: %s", prefix, canonical(st.Code().String()), reason, st.Message())
}

// canonical turns a code's Go name (FailedPrecondition) into its wire name (FAILED_PRECONDITION).
func canonical(name string) string {
	var out strings.Builder
	for i, r := range name {
		if i > 0 && unicode.IsUpper(r) {
			out.WriteByte('_')
		}
		out.WriteRune(unicode.ToUpper(r))
	}
	return out.String()
}

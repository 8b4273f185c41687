package query

import "fmt"

// Error is returned for every invalid input: a malformed or disallowed
// filter, a bad sort specification or an unusable cursor. Message is a
// sentence a person can act on; an HTTP handler can return it as a 400.
type Error struct {
	Message string
}

// Error returns e.Message.
func (e *Error) Error() string { return e.Message }

// filterError returns an *Error about a filter.
func filterError(format string, args ...any) error {
	return &Error{Message: "invalid filter: " + fmt.Sprintf(format, args...)}
}

// sortError returns an *Error about a sort specification.
func sortError(format string, args ...any) error {
	return &Error{Message: "invalid sort: " + fmt.Sprintf(format, args...)}
}

package admin

import (
	"encoding/json"
	"fmt"
)

// CallError is a failed admin API call as a client sees it.
type CallError struct {
	Status int
	Msg    string
}

func (e *CallError) Error() string { return e.Msg }

// DecodeError turns a failed admin answer into an error.
func DecodeError(status int, body []byte) error {
	var ae ErrorBody
	if json.Unmarshal(body, &ae) != nil || ae.Error == "" {
		return &CallError{Status: status, Msg: fmt.Sprintf("admin API status %d: %q", status, body)}
	}
	return &CallError{Status: status, Msg: ae.Error}
}

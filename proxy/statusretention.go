package proxy

import "github.com/tfmirror/tfmirror/v2/retention"

// maxStatusPinned bounds the pinned versions the status page lists.
const maxStatusPinned = 500

// RetentionSource says what retention keeps, for the status page
// (Config.Retention).
type RetentionSource interface {
	Status() retention.Status
}

// retentionStatus is Config.Retention's status, with at most
// maxStatusPinned pinned versions; nil without it.
func (s *statusPage) retentionStatus() *retention.Status {
	if s.cfg.Retention == nil {
		return nil
	}
	st := s.cfg.Retention.Status()
	if len(st.Pinned) > maxStatusPinned {
		st.Pinned = st.Pinned[:maxStatusPinned]
	}
	return &st
}

package proxy

import "github.com/tfmirror/tfmirror/mirror"

// maxStatusPinned bounds the pinned versions the status page lists.
const maxStatusPinned = 500

// retentionStatus is the engine's retention status when it has one
// (*mirror.Engine does), with at most maxStatusPinned pinned versions.
func (s *Server) retentionStatus() *mirror.RetentionStatus {
	re, ok := s.engine.(interface{ RetentionStatus() mirror.RetentionStatus })
	if !ok {
		return nil
	}
	st := re.RetentionStatus()
	if len(st.Pinned) > maxStatusPinned {
		st.Pinned = st.Pinned[:maxStatusPinned]
	}
	return &st
}

package cache

// waitCount waits until what Open started in the background is over: the
// count of the archives, and the clean-up and trimming that follow it.
// Tests that change the store's fields after Open call it first.
func (s *Store) waitCount() {
	s.mu.Lock()
	c := s.count
	s.mu.Unlock()
	if c.exited != nil {
		<-c.exited
	}
}

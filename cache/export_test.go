package cache

// The package's own tests call these by their former, exported names.

func (s *Store) DeleteBlob(sha string) error { return RigOf(s).DeleteBlob(sha) }
func (s *Store) ChunkCount() (int, error)    { return RigOf(s).ChunkCount() }
func (s *Store) CleanOrphans() (int, error)  { return s.cleanOrphans() }

package cache

// The package's own tests call these by their former, exported names.

func (s *Store) DeleteBlob(sha string) error { return s.deleteBlob(sha) }
func (s *Store) ChunkCount() (int, error)    { return s.chunkCount() }
func (s *Store) CleanOrphans() (int, error)  { return s.cleanOrphans() }

package sharedstore

// SmallReadBudget is smallReadBudget, for the tests.
const SmallReadBudget = smallReadBudget

// HoldSmallReads takes n bytes of the store's budget of reads at once,
// until release is called.
func (s *Store) HoldSmallReads(n int64) (release func()) {
	if !s.smallReads.TryAcquire(n) {
		panic("the budget is taken")
	}
	return func() { s.smallReads.Release(n) }
}

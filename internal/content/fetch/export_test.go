package fetch

// SetJoinedHook lets tests see when a Fetch is waiting on a download, so they
// can hold the download until every caller has joined it.
func SetJoinedHook(f *Fetcher, hook func()) { f.joined = hook }

// SetBudgetWaitHook lets tests see when a download waits for room in the
// in-flight budget.
func SetBudgetWaitHook(f *Fetcher, hook func()) { f.budget.waiting = hook }

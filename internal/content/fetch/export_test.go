package fetch

// SetJoinedHook lets tests see when a Fetch is waiting on a download, so they
// can hold the download until every caller has joined it.
func SetJoinedHook(f *Fetcher, hook func()) { f.joined = hook }

package web

// SetDocumentsPerPage sets how many documents a page lists and returns what restores it. Only
// a test that does not run in parallel may call it.
func SetDocumentsPerPage(n int) (restore func()) {
	old := documentsPerPage
	documentsPerPage = n
	return func() { documentsPerPage = old }
}

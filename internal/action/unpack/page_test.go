package unpack

// Pages of 2: the tests read every zip's directory across pages. A directory read whole may
// have 100,000 bytes: TestZipWholeDirectoryBounded goes past that with 3,000 records.
func init() {
	zipPage = 2
	zipWholeDirMax = 100_000
}

package unpack

// Pages of 2: the tests read every zip's directory across pages.
func init() { zipPage = 2 }

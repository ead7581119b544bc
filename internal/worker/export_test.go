package worker

// Pages of 10: the tests page through children of an earlier attempt without making thousands.
func init() { earlierPage = 10 }

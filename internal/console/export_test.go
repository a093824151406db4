package console

// Grouped is grouped, for the tests of package console_test.
var Grouped = grouped

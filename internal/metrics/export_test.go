package metrics

// OperatorCollectors are the collectors init registers, for the tests of
// the alerts and dashboards that query them.
var OperatorCollectors = operatorCollectors

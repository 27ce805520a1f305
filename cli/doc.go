// Package cli owns the enrichd command line: one cobra command a group (serve, orgs,
// keys, users, credits, import, tasks, loops, deliveries, enrich, sources, bench,
// backup, version), their flags and the ENRICHD_<FLAG> environment variables that set them,
// and the wiring of a running service from those flags: the server's configuration,
// the sources in the order --sources names them, the webhook policy. A command
// reaches the database only through store and the API only through client; main
// builds the root command with NewRootCommand and runs it.
package cli

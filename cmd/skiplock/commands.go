package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/skiplock/skiplock/admin"

	"github.com/jackc/pgx/v5"
)

// A command is one row of the command table. A command either declares flags and a run
// function (setup), and gets flag parsing, help, the connection flags (db) and -o (output)
// from here; or parses its own arguments (runRaw), as `skiplock ui` does.
type command struct {
	name     string // "list", or "schedule add" for a subcommand
	synopsis string // what follows the name in the usage line: "KIND [PAYLOAD | -] [flags]"
	summary  string // one line, for `skiplock help`
	help     string // paragraphs after the usage line of `skiplock help NAME`; ends with a newline

	db     bool // takes --database-url and --schema, and runs with a session (call.conn)
	output bool // takes -o table|json

	// setup registers the command's own flags and returns the function that runs it.
	setup func(fs *flag.FlagSet) func(ctx context.Context, c *call) error

	// runRaw, instead of setup, gets the arguments after the name unparsed; help is then
	// printed from the table, flags and all, only by `skiplock help NAME`.
	runRaw func(ctx context.Context, e *env, args []string) error
}

// call is what a running command gets: the process, its positional arguments, the output
// format and, for db commands, the session.
type call struct {
	*env
	args   []string
	format outputFormat
	conn   *pgx.Conn
}

// admin is the operator functions' API over the command's connection, whose search_path is
// --schema when given, so the functions are called unqualified.
func (c *call) admin() *admin.Client { return admin.New(c.conn, nil) }

// commands is the table of every command, in the order `skiplock help` lists them. A new
// row shows in docs/cli.md after `go test ./cmd/skiplock -run TestCLIDoc -update`.
var commands = []*command{
	migrateCommand,
	sqlCommand,
	enqueueCommand,
	listCommand,
	showCommand,
	waitCommand,
	retryCommand,
	cancelCommand,
	deleteCommand,
	workflowShowCommand,
	workflowCancelCommand,
	queuesCommand,
	pauseCommand,
	resumeCommand,
	limitCommand,
	scheduleAddCommand,
	scheduleListCommand,
	scheduleRmCommand,
	scheduleRunCommand,
	scheduleEnableCommand,
	scheduleDisableCommand,
	scheduleTickCommand,
	topicSubscribeCommand,
	topicUnsubscribeCommand,
	topicListCommand,
	topicPublishCommand,
	maintainCommand,
	workCommand,
	uiCommand,
	statsCommand,
}

// groups are the names that take a subcommand ("schedule add").
func isGroup(name string) bool {
	for _, c := range commands {
		if strings.HasPrefix(c.name, name+" ") {
			return true
		}
	}
	return false
}

func findCommand(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// lookup finds the command that args start with, and returns the arguments after its name.
func lookup(args []string) (*command, []string, error) {
	name := args[0]
	if isGroup(name) {
		if len(args) < 2 || strings.HasPrefix(args[1], "-") {
			return nil, nil, usageErrorf("%s: missing subcommand (%s)", name, strings.Join(subcommands(name), ", "))
		}
		name += " " + args[1]
		args = args[1:]
	}
	c := findCommand(name)
	if c == nil {
		return nil, nil, usageErrorf("unknown command %q (run 'skiplock help')", name)
	}
	return c, args[1:], nil
}

func subcommands(group string) []string {
	var subs []string
	for _, c := range commands {
		if sub, ok := strings.CutPrefix(c.name, group+" "); ok {
			subs = append(subs, sub)
		}
	}
	return subs
}

// run runs one command line.
func run(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, overview())
		return usageErrorf("missing command")
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return runHelp(e, args[1:])
	}
	c, rest, err := lookup(args)
	if err != nil {
		return err
	}
	if c.runRaw != nil {
		return c.runRaw(ctx, e, rest)
	}

	fs := c.flagSet()
	runFn := c.setup(fs)
	var db dbFlags
	if c.db {
		db.register(fs)
	}
	format := outputTable
	if c.output {
		fs.Var(&format, "o", "output `format`: table or json")
	}
	positional, err := parseInterspersed(fs, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, err := io.WriteString(e.stdout, c.helpText())
			return err
		}
		return &exitError{code: exitUsage, err: fmt.Errorf("%s: %w", c.name, err)}
	}
	cl := &call{env: e, args: positional, format: format}
	if c.db {
		conn, err := db.connect(ctx, e)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		cl.conn = conn
	}
	return runFn(ctx, cl)
}

// parseInterspersed parses flags anywhere among the arguments (skiplock enqueue email
// '{}' --queue mail), as far as a "--", after which everything is an argument; it returns
// the arguments that are not flags, in order.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		consumed := len(args) - fs.NArg()
		rest := fs.Args()
		if consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// flagSet is the command's flag set, silent: errors are returned, help is `help NAME`.
func (c *command) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("skiplock "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// helpText is `skiplock help NAME`: the usage line, the command's text, its flags.
func (c *command) helpText() string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: skiplock %s %s\n\n%s", c.name, c.synopsis, c.help)
	if c.setup == nil {
		return b.String()
	}
	fs := c.flagSet()
	c.setup(fs)
	if c.db {
		var db dbFlags
		db.register(fs)
	}
	if c.output {
		format := outputTable
		fs.Var(&format, "o", "output `format`: table or json")
	}
	b.WriteString("\nflags:\n")
	fs.SetOutput(&b)
	fs.PrintDefaults()
	return b.String()
}

// overview is `skiplock help`.
func overview() string {
	var b strings.Builder
	b.WriteString(`usage: skiplock COMMAND [flags] [arguments]

skiplock operates a skiplock job queue in PostgreSQL. Every command calls skiplock's SQL
functions (docs/sql-api.md); a role granted jobs_admin may run all but enqueue (jobs_producer)
and migrate (the schema's owner).

commands:
`)
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.name, c.summary)
	}
	b.WriteString(`
connection (every command but sql):
  --database-url URL, else $DATABASE_URL, else the PG* variables (PGHOST, PGPORT, PGUSER,
  PGPASSWORD, PGDATABASE, ...) with libpq's defaults; --schema NAME when skiplock is installed
  in a schema that is not on the search_path.

output:
  read commands take -o table (the default, for people) or -o json (stable, for scripts:
  the fields are listed in each command's help and docs/cli.md; fields may be added, none
  are renamed or removed). Timestamps are RFC 3339 in UTC, durations seconds.

exit codes:
  0  ok
  1  failed (the database refused or could not be reached; not confirmed)
  2  usage: an unknown command or flag, a missing or bad argument, a value the SQL
     functions refuse (SQLSTATE 22023, naming the parameter)
  3  not found: no such job, schedule, workflow or command help
  4  timed out: skiplock wait's --timeout passed before the job ended

Run 'skiplock help COMMAND' for a command's flags, output and examples.
`)
	return b.String()
}

// runHelp is `skiplock help [COMMAND]`.
func runHelp(e *env, args []string) error {
	if len(args) == 0 {
		_, err := io.WriteString(e.stdout, overview())
		return err
	}
	name := strings.Join(args, " ")
	if c := findCommand(name); c != nil {
		_, err := io.WriteString(e.stdout, c.helpText())
		return err
	}
	if isGroup(name) {
		var b strings.Builder
		for _, sub := range subcommands(name) {
			b.WriteString(findCommand(name + " " + sub).helpText())
			b.WriteString("\n")
		}
		_, err := io.WriteString(e.stdout, b.String())
		return err
	}
	return notFoundErrorf("help: unknown command %q (run 'skiplock help')", name)
}

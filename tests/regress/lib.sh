# shellcheck shell=bash disable=SC2034 # the functions set variables for the sourcing script
# Shared by tests/regress/run and tests/isolation/run (sourced, not executed), so that
# both suites find binaries, name databases and report differences the same way.
# Needs bash, diff and the PostgreSQL client; Go only to print the install SQL.

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

die() {
    echo "$(basename "$0"): $*" >&2
    exit 2
}

# pg_tool: PostgreSQL's programs are found in one order everywhere (PGBIN, the newest
# /usr/lib/postgresql/<major>/bin, PATH); see scripts/lib/pgbin.sh.
# shellcheck source=scripts/lib/pgbin.sh
source "$repo_root/scripts/lib/pgbin.sh"

# find_psql: $PSQL when set, else psql where pg_tool finds it.
find_psql() {
    if [[ -n ${PSQL:-} ]]; then
        psql=$PSQL
        return
    fi
    psql=$(pg_tool psql 2>/dev/null) || die "psql not found: install the PostgreSQL client or set PSQL (or PGBIN)"
}

# find_isolationtester: $ISOLATIONTESTER when set, else under the package library directory
# of the pg_config that pg_tool finds. It comes with the server's development files
# (Debian: postgresql-server-dev-NN).
find_isolationtester() {
    local rel=pgxs/src/test/isolation/isolationtester pg_config
    if [[ -n ${ISOLATIONTESTER:-} ]]; then
        isolationtester=$ISOLATIONTESTER
        return
    fi
    pg_config=$(pg_tool pg_config 2>/dev/null) ||
        die "isolationtester not found: no pg_config; install the PostgreSQL server development files or set ISOLATIONTESTER"
    isolationtester="$("$pg_config" --pkglibdir)/$rel"
    [[ -x $isolationtester ]] ||
        die "isolationtester not found at $isolationtester: install the PostgreSQL server development files (Debian: postgresql-server-dev-NN) or set ISOLATIONTESTER"
}

# with_dbname CONNINFO DBNAME: CONNINFO (a URL or keyword/value string) pointed at DBNAME.
with_dbname() {
    local conninfo=$1 db=$2
    if [[ $conninfo =~ ^(postgres(ql)?://[^/?]*)(/[^?]*)?(\?.*)?$ ]]; then
        echo "${BASH_REMATCH[1]}/$db${BASH_REMATCH[4]}"
    else
        # In keyword/value strings a later keyword wins.
        echo "$conninfo dbname=$db"
    fi
}

# install_sql_file DIR: a file with the install SQL. SKIPLOCK_INSTALL_SQL names a
# precomputed one, for machines without Go; otherwise `skiplock sql` prints it.
install_sql_file() {
    if [[ -n ${SKIPLOCK_INSTALL_SQL:-} ]]; then
        [[ -r $SKIPLOCK_INSTALL_SQL ]] || die "SKIPLOCK_INSTALL_SQL: cannot read $SKIPLOCK_INSTALL_SQL"
        echo "$SKIPLOCK_INSTALL_SQL"
        return
    fi
    command -v go >/dev/null 2>&1 || die "go not found: set SKIPLOCK_INSTALL_SQL to the output of 'skiplock sql'"
    (cd "$repo_root" && go run ./cmd/skiplock sql) >"$1/install.sql" || die "failed to print the install SQL"
    echo "$1/install.sql"
}

# Databases made by create_database, dropped by drop_databases (run it from an EXIT trap).
created_databases=()

# create_database ADMIN_CONNINFO NAME INSTALL_FILE: a fresh database with skiplock installed.
create_database() {
    local admin=$1 name=$2 install=$3 out
    out=$("$psql" -X -w -q -v ON_ERROR_STOP=1 -d "$admin" \
        -c "DROP DATABASE IF EXISTS \"$name\" WITH (FORCE)" -c "CREATE DATABASE \"$name\"" 2>&1) ||
        die "failed to create database $name: $out"
    created_databases+=("$name")
    out=$("$psql" -X -w -q -v ON_ERROR_STOP=1 -d "$(with_dbname "$admin" "$name")" -f "$install" 2>&1 >/dev/null) ||
        die "failed to install skiplock in $name: $out"
}

drop_databases() {
    local name
    for name in "${created_databases[@]}"; do
        "$psql" -X -w -q -d "$admin_conninfo" -c "DROP DATABASE IF EXISTS \"$name\" WITH (FORCE)" >/dev/null 2>&1 ||
            echo "$(basename "$0"): failed to drop database $name" >&2
    done
}

# compare NAME EXPECTED RESULT: 0 when they match EXPECTED or one of its alternatives
# (EXPECTED with _1 to _9 before .out, as pg_regress allows: a spec whose sessions may finish
# in either of two orders, each keeping the same promises). With accept=1 a difference
# rewrites EXPECTED instead; otherwise the unified diff against EXPECTED is printed.
compare() {
    local name=$1 expected=$2 result=$3 alt
    for alt in "$expected" "${expected%.out}"_[1-9].out; do
        if [[ -f $alt ]] && diff -q "$alt" "$result" >/dev/null; then
            echo "ok      $name"
            return 0
        fi
    done
    if [[ ${accept:-0} == 1 ]]; then
        cp "$result" "$expected"
        echo "accept  $name (wrote ${expected#"$repo_root"/})"
        return 0
    fi
    echo "FAILED  $name"
    if [[ -f $expected ]]; then
        diff -u "$expected" "$result" | sed "1s|^--- .*|--- ${expected#"$repo_root"/}|; 2s|^+++ .*|+++ $result|"
    else
        echo "  no ${expected#"$repo_root"/}: review $result, then rerun with --accept"
    fi
    return 1
}

# parse_args USAGE "$@": sets accept, existing, results_dir, admin_conninfo and tests.
# The first argument that looks like a URL or a conninfo string (has :// or =) is the
# database; other non-flag arguments name tests.
parse_args() {
    local usage=$1
    shift
    accept=0 existing=0 results_dir="" admin_conninfo=${DATABASE_URL:-} tests=()
    while (($#)); do
        case $1 in
        --accept) accept=1 ;;
        --existing) existing=1 ;;
        --results) results_dir=${2:?--results needs a directory}; shift ;;
        --results=*) results_dir=${1#--results=} ;;
        -h | --help) echo "$usage"; exit 0 ;;
        -*) die "unknown flag $1"$'\n'"$usage" ;;
        *://* | *=*) admin_conninfo=$1 ;;
        *) tests+=("${1%.*}") ;;
        esac
        shift
    done
    [[ -n $admin_conninfo ]] || die "no server: pass a DATABASE_URL argument or set DATABASE_URL"$'\n'"$usage"
    if ((existing)) && ((${#tests[@]} != 1)); then
        die "--existing runs exactly one test"
    fi
}

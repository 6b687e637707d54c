# shellcheck shell=bash
# Where the shell scripts find PostgreSQL's programs. Sourced (not executed) by scripts/test
# and tests/regress/lib.sh, so that every script searches in one order, the order of
# internal/pglocal (FindBinaries for the server, Tool for any program); a Go test
# (internal/pglocal TestShellSearchAgrees) checks that both pick the same files:
#
#   1. PGBIN, when set, and then only there: whoever set it meant that directory;
#   2. the newest /usr/lib/postgresql/<major>/bin (Debian's layout, not on PATH) of at
#      least pg_min_major that holds the program;
#   3. PATH.
#
# The functions print a path and return 0, or print a reason on stderr and return 1.

# Oldest PostgreSQL major version skiplock supports; keep in step with pglocal.MinMajorVersion.
pg_min_major=13

# pg_versioned_bin_dirs PROGRAM: each /usr/lib/postgresql/<major>/bin holding an executable
# PROGRAM whose major is at least pg_min_major, newest first.
pg_versioned_bin_dirs() {
	local program=$1 dir major
	for dir in /usr/lib/postgresql/*/bin; do
		[[ -x $dir/$program && ! -d $dir/$program ]] || continue
		major=$(basename "$(dirname "$dir")")
		major=${major%%.*}
		[[ $major =~ ^[0-9]+$ ]] && ((major >= pg_min_major)) || continue
		echo "$major $dir"
	done | sort -k1,1 -rn | cut -d' ' -f2-
}

# pg_server_major DIR: the major version of DIR/postgres.
pg_server_major() {
	"$1/postgres" --version 2>/dev/null | sed -n 's/.*(PostgreSQL) \([0-9]*\).*/\1/p'
}

# pg_is_server_dir DIR: whether DIR holds initdb, pg_ctl and a postgres of at least
# pg_min_major.
pg_is_server_dir() {
	local dir=$1 major
	[[ -x $dir/initdb && -x $dir/pg_ctl && -x $dir/postgres ]] || return 1
	major=$(pg_server_major "$dir")
	[[ -n $major ]] && ((major >= pg_min_major))
}

# pg_server_bin_dir: the directory holding initdb, pg_ctl and postgres (pglocal.FindBinaries
# without its apt-get install).
pg_server_bin_dir() {
	local dir initdb
	if [[ -n ${PGBIN:-} ]]; then
		if pg_is_server_dir "$PGBIN"; then
			echo "$PGBIN"
			return 0
		fi
		echo "PGBIN=$PGBIN does not hold initdb, pg_ctl and postgres $pg_min_major+" >&2
		return 1
	fi
	while IFS= read -r dir; do
		if pg_is_server_dir "$dir"; then
			echo "$dir"
			return 0
		fi
	done < <(pg_versioned_bin_dirs initdb)
	# Distributions often link /usr/bin/initdb into a versioned directory; the other
	# programs are only sure to sit next to the real file.
	if initdb=$(command -v initdb) && dir=$(dirname "$(readlink -f "$initdb")") && pg_is_server_dir "$dir"; then
		echo "$dir"
		return 0
	fi
	echo "PostgreSQL $pg_min_major+ server binaries not found in /usr/lib/postgresql/<major>/bin or on PATH" >&2
	return 1
}

# pg_tool NAME: the path of PostgreSQL's program NAME (psql, pg_dump, pg_config...)
# (pglocal.Tool).
pg_tool() {
	local name=$1 dir path
	if [[ -n ${PGBIN:-} ]]; then
		if [[ -x $PGBIN/$name && ! -d $PGBIN/$name ]]; then
			echo "$PGBIN/$name"
			return 0
		fi
		echo "PGBIN=$PGBIN holds no executable $name" >&2
		return 1
	fi
	dir=$(pg_versioned_bin_dirs "$name" | head -n 1)
	if [[ -n $dir ]]; then
		echo "$dir/$name"
		return 0
	fi
	if path=$(command -v "$name") && [[ $path == */* ]]; then
		echo "$path"
		return 0
	fi
	echo "$name not found in /usr/lib/postgresql/<major>/bin or on PATH: install PostgreSQL's client programs or set PGBIN" >&2
	return 1
}

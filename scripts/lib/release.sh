# shellcheck shell=bash
# The release marker, migrations/RELEASED, as the shell scripts read it. Sourced by
# scripts/new-migration and scripts/release; released_test.go reads the same file (readReleases)
# and recomputes the same sums (releaseFilesSum).
#
# Each line of the marker, after the comments, is one release, oldest first:
#
#   RELEASE  SCHEMA  PROXY  SHA256
#
# RELEASE is the tag (vX.Y.Z; "untagged" for the versions users ran before the first tag),
# SCHEMA and PROXY are the last migration of each set the release contains
# (migrations/NNN_*.sql and migrations/proxy/NNN_*.sql, 0 for none), and SHA256 is
# release_files_sum SCHEMA PROXY: what freezes the released migrations' files.

release_marker=migrations/RELEASED

# released FIELD prints FIELD (2: schema, 3: proxy, 1: release) of the newest release.
released() {
	[[ -f $release_marker ]] || {
		echo "no $release_marker" >&2
		return 1
	}
	awk -v f="$1" '!/^#/ && NF { v = $f } END { print v }' "$release_marker"
}

# release_files lists, sorted, the files of the migrations up to SCHEMA and, under
# migrations/proxy, up to PROXY: each migration and the snapshots it froze.
release_files() {
	local schema=$1 proxy=$2 dir limit f n
	for dir in migrations migrations/proxy; do
		limit=$schema
		[[ $dir == migrations/proxy ]] && limit=$proxy
		for f in "$dir"/[0-9][0-9][0-9]_*.sql; do
			[[ -e $f ]] || continue
			n=$(basename "$f")
			if ((10#${n:0:3} <= limit)); then echo "$f"; fi
		done
		for f in "$dir"/snapshots/[0-9][0-9][0-9]; do
			[[ -e $f ]] || continue
			n=$(basename "$f")
			if ((10#$n <= limit)); then find "$f" -type f; fi
		done
	done | LC_ALL=C sort
}

# release_files_sum SCHEMA PROXY prints the sha256 of sha256sum's listing of release_files.
release_files_sum() {
	release_files "$1" "$2" | xargs -d '\n' sha256sum | sha256sum | cut -c1-64
}

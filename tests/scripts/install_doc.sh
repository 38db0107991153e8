#!/usr/bin/env bash
# The install guide's commands, run as written (docs/install.md, every ```sh
# block right after a line "<!-- tested: install_doc -->"). Sourced by
# test.sh, which calls install_doc_check as root; the results are
# "PASS|FAIL install_doc/<who>:<n> <command>", one per command, in order,
# for <who> root and the unprivileged user; after a failed command the rest
# of that run is not attempted.
#
# Each run happens in a mount and network namespace of its own (unshare), in
# which the machine's PostgreSQL directories are private copies without any
# fencing file (/usr/lib/postgresql/MAJOR, /usr/share/postgresql/MAJOR, its
# documentation directory) and /etc/postgresql, /var/lib/postgresql,
# /var/run/postgresql and /var/log/postgresql are empty directories: a stock
# cluster made there by pg_createcluster (peer authentication on the socket,
# scram-sha-256 on loopback, as the package makes it) listens on the default
# port of a loopback interface of its own. `sudo apt-get install` lines are
# not run: they pass when every package they name is installed (test.sh
# installed them). The unprivileged user may use sudo within its namespace
# only (a sudoers.d of the namespace). The checkout is the release archive
# unpacked (a clean checkout of the working tree's tracked files), owned by
# the user who runs the commands. Every cluster is stopped at the end.

# install_doc_blocks FILE: the tested blocks' commands, one per line
# (continuation lines joined, comments and blank lines dropped).
install_doc_blocks() {
  python3 - "$1" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().split("\n")
out, i, armed = [], 0, False
while i < len(lines):
    l = lines[i]
    if l.strip() == "<!-- tested: install_doc -->":
        armed = True
    elif armed and l.startswith("```"):
        i += 1
        cmd = ""
        while i < len(lines) and not lines[i].startswith("```"):
            c = lines[i]
            if cmd:
                cmd += " " + c.strip()
            elif c.strip() and not c.lstrip().startswith("#"):
                cmd = c.strip()
            if cmd.endswith("\\"):
                cmd = cmd[:-1].rstrip()
            elif cmd:
                out.append(cmd)
                cmd = ""
            i += 1
        armed = False
    elif l.strip():
        armed = False
    i += 1
print("\n".join(out))
PY
}

# install_doc_run WHO DIR MAJOR ZIP: one run, as WHO, of the commands in a
# namespace of its own (as root), in the release archive ZIP unpacked in DIR.
install_doc_run() {
  local who="$1" dir="$2" major="$3"
  rm -rf "$dir"
  mkdir -p "$dir"
  install_doc_blocks "$FENCING_ROOT/docs/install.md" > "$dir/commands.txt"
  mkdir -p "$dir/checkout"
  (cd "$dir/checkout" && unzip -q "$4")
  chmod 755 "$dir" "$dir/checkout"
  [ "$who" = root ] || chown -R "$who" "$dir/checkout"
  cat > "$dir/ns.sh" <<'NS'
# Any failure while the namespace is set up ends the run before a command
# runs: the commands must never reach the machine's own directories.
set -eu
who="$1" dir="$2" major="$3"
ns="$dir/ns"
ip link set lo up
mkdir -p "$ns"
docdir="$(/usr/lib/postgresql/$major/bin/pg_config --docdir)"
for d in "/usr/lib/postgresql/$major" "/usr/share/postgresql/$major"; do
  mkdir -p "$ns/copy$d"
  cp -al "$d/." "$ns/copy$d/"
  mount --bind "$ns/copy$d" "$d"
done
# The documentation directory: a copy where it exists; else an empty
# directory over its parent (nothing is created on the machine itself).
if [ -d "$docdir" ]; then
  mkdir -p "$ns/copy$docdir"
  cp -al "$docdir/." "$ns/copy$docdir/"
  mount --bind "$ns/copy$docdir" "$docdir"
else
  mkdir -p "$ns/docparent"
  mount --bind "$ns/docparent" "$(dirname "$docdir")"
fi
rm -f "/usr/lib/postgresql/$major/lib/fencing.so" "/usr/share/postgresql/$major/extension"/fencing[.-]* "$docdir/extension/fencing.md"
for d in /etc/postgresql /var/lib/postgresql /var/run/postgresql /var/log/postgresql /etc/sudoers.d; do
  mkdir -p "$ns$d" "$d"
  mount --bind "$ns$d" "$d"
done
chown postgres:postgres /var/lib/postgresql /var/run/postgresql
chmod 2775 /var/run/postgresql
chown root:postgres /var/log/postgresql
chmod 1775 /var/log/postgresql
if [ "$who" != root ]; then
  echo "$who ALL=(ALL:ALL) NOPASSWD: ALL" > /etc/sudoers.d/install-doc
  chmod 0440 /etc/sudoers.d/install-doc
fi
for d in "/usr/lib/postgresql/$major" "/usr/share/postgresql/$major" /etc/postgresql /var/lib/postgresql \
         /var/run/postgresql /var/log/postgresql /etc/sudoers.d; do
  mountpoint -q "$d" || { echo "SETUP $d is not a private mount"; exit 1; }
done
[ -z "$(ls -A /etc/postgresql)" ] || { echo "SETUP /etc/postgresql is not empty"; exit 1; }
set +e
stop() { pg_dropcluster --stop "$major" main >/dev/null 2>&1 || true; }
trap stop EXIT
pg_createcluster "$major" main --start > "$dir/createcluster.txt" 2>&1 || { echo "SETUP pg_createcluster failed"; cat "$dir/createcluster.txt"; exit 1; }
n=0
while IFS= read -r cmd <&3; do
  n=$((n + 1))
  rc=0
  case "$cmd" in
    "sudo apt-get install "*)
      for p in ${cmd#sudo apt-get install }; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
          { echo "  $p is not installed" >> "$dir/out.$n.txt"; rc=1; }
      done ;;
    *)
      if [ "$who" = root ]; then
        (cd "$dir/checkout"/* && env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
           HOME=/root USER=root LOGNAME=root bash -c "$cmd") > "$dir/out.$n.txt" 2>&1 || rc=$?
      else
        (cd "$dir/checkout"/* && runuser -u "$who" -- env -i PATH=/usr/local/bin:/usr/bin:/bin \
           HOME="$dir" USER="$who" LOGNAME="$who" bash -c "$cmd") > "$dir/out.$n.txt" 2>&1 || rc=$?
      fi ;;
  esac
  if [ "$rc" -eq 0 ]; then
    echo "PASS $n $cmd"
  else
    echo "FAIL $n $cmd (exit status $rc)"
    sed 's/^/    /' "$dir/out.$n.txt" | tail -n 30 >&2
    break
  fi
done 3< "$dir/commands.txt"
NS
  unshare --mount --net --propagation private bash "$dir/ns.sh" "$who" "$dir" "$major" > "$dir/results.txt" 2> "$dir/ns.log"
  return 0
}

# install_doc_check DIR: both runs; results into $results.
install_doc_check() {
  local dir="$1" zip major who label n line
  major="$("$SYS_PGBIN/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')"
  zip="$(ls "$work"/packaging/fencing-*.zip 2>/dev/null | head -n 1)"
  if [ -z "$zip" ]; then
    echo "FAIL install_doc/setup (no release archive: the dist step did not make one)" >> "$results"
    return 0
  fi
  if [ -z "$(install_doc_blocks "$FENCING_ROOT/docs/install.md")" ]; then
    echo "FAIL install_doc/setup (docs/install.md has no tested block)" >> "$results"
    return 0
  fi
  for who in root "$FENCING_USER"; do
    label="$who"
    [ "$who" = root ] || label=user
    log "install_doc: the install guide's commands as $who"
    install_doc_run "$who" "$dir/$label" "$major" "$zip"
    n=0
    while IFS= read -r line; do
      case "$line" in
        PASS*|FAIL*) n=$((n + 1)); echo "${line%% *} install_doc/$label:${line#* }" >> "$results" ;;
        SETUP*) echo "FAIL install_doc/$label (${line#SETUP }; see $dir/$label)" >> "$results"; n=1 ;;
      esac
    done < "$dir/$label/results.txt"
    if [ "$n" -eq 0 ]; then
      echo "FAIL install_doc/$label (no command ran: $dir/$label/ns.log)" >> "$results"
    fi
    sed 's/^/  /' "$dir/$label/ns.log" | tail -n 40 >&2
  done
}

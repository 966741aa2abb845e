#!/usr/bin/env bash
# tests/slurm/harness.sh - a throw-away multi-node Slurm cluster on this one machine, for the tests.
#
# Debian 12 (bookworm) packages, run as root, no systemd, no cgroups. Seven nodes, each a slurmd in
# its own network namespace and UTS namespace (its own host name and address), all on this
# machine's cores and file system:
#
#   node  address        partition      GRES          what it stands for
#   cpu1  10.213.0.11    cpu (default)  -             five identical cpu nodes: one per timed job
#   cpu2  10.213.0.12    cpu            -             of the tests' cpu grid (four train jobs and
#   cpu3  10.213.0.13    cpu            -             the profile job, each given a whole node by
#   cpu4  10.213.0.14    cpu            -             slurm.exclusive), so the repeats of a
#   cpu5  10.213.0.15    cpu            -             combination run on different nodes
#   gpu1  10.213.0.21    gpu            gpu:t4:2      two GPU node types, told apart by their
#   gpu2  10.213.0.22    gpu            gpu:a100:2    GRES type (--gpus=t4:1, --gpus=a100:1)
#
# The GPUs are fake: character devices cloned from /dev/null (mknod c 1 3), which is all slurmd
# needs to schedule and record a GPU; a job that gets one sees CUDA_VISIBLE_DEVICES=0 but no CUDA.
# Each node's namespace is joined to a bridge, mnb-br0 (10.213.0.1/24), by a veth pair; the
# bridge, the pairs and the namespaces are created by `start` and removed by `stop`, and carry
# nothing but this cluster's traffic (no route out, no forwarding). slurmctld, slurmdbd, MariaDB and
# munged stay in the root namespace: the nodes reach slurmctld at 10.213.0.1, and munge through
# its file-system socket (/run/munge/munge.socket.2), which namespaces do not separate. The
# nodes' jobs see the same files as the test (their working directory, the timed-run lock under
# /tmp); a service the test runs for the jobs (e.g. an HTTP mirror) listens on 10.213.0.1.
# Accounting runs through slurmdbd + a private MariaDB, so that `sacct` (the executor plugin's
# default status command, and the tests' record of node, partition and TRES per job) works.
#
# Usage:
#   harness.sh start  STATEDIR   install packages if missing, create the bridge and the node
#                                namespaces, write configs under STATEDIR, start munged,
#                                mariadbd, slurmdbd, slurmctld and one slurmd per node, wait until
#                                every node is idle. Idempotent: what is already there (daemons
#                                started from STATEDIR, the namespaces) is kept.
#   harness.sh stop   STATEDIR   cancel jobs, stop the daemons started from STATEDIR by the PIDs
#                                in their PID files (never by process name), delete the
#                                namespaces and links listed in STATEDIR/net (those `start`
#                                created), remove the /etc/slurm links.
#   harness.sh status STATEDIR   show PIDs and sinfo.
#
# Exit codes of start: 0 up; 77 the cluster cannot be built here (Slurm cannot be installed, or
# no network namespaces); the last stderr line is "harness: SKIP: <reason>", for a test to skip
# with; 1 anything else (a real failure; the log files are under STATEDIR/log).
#
# Callers: /etc/slurm/{slurm,gres,slurmdbd}.conf become symlinks into STATEDIR/etc, so
# sbatch/sacct/srun find the config without any variable, on the nodes too. That is needed
# because the job-step side of the executor plugin deletes every SLURM_* variable (SLURM_CONF
# included) before it calls `srun` inside a job. STATEDIR/env holds `export SLURM_CONF=...` and
# `export HARNESS_ADDR=10.213.0.1` (the address nodes reach the root namespace at) for callers.
#
# Why the nodes are sized as they are: every node declares this machine's real layout (`slurmd
# -C`), so a job never asks for cores that are not there. TaskPlugin is task/none: the seven
# slurmds share this machine's cores, and task/affinity would pin the first job of every node to
# the same core (core 0 of each node is core 0 of the machine), so jobs that Slurm placed on
# different nodes would queue for one core; unbound, the kernel spreads them. On a real cluster,
# where a node's cores are its own, task/affinity or task/cgroup holds a job to its cores.
#
# Knobs (environment): HARNESS_DB_PORT (default 13306: the private MariaDB listens on 127.0.0.1
# only, on a port that a system MariaDB does not use); HARNESS_NET (default 10.213.0: the /24 of
# the bridge and the nodes). Slurm's own ports are the standard 6817-6819 and the bridge and
# namespace names are fixed (mnb-*), so one harness per machine.
set -euo pipefail

log() { echo "harness: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
skip() { log "SKIP: $*"; exit 77; }

ACTION=${1:-}
DIR=${2:-}
case "$ACTION" in start|stop|status) ;; *) echo "usage: $0 start|stop|status STATEDIR" >&2; exit 2;; esac
[ -n "$DIR" ] || { echo "usage: $0 $ACTION STATEDIR" >&2; exit 2; }
[ "$(id -u)" = 0 ] || skip "must run as root (installs packages, starts daemons as root)"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

ETC=$DIR/etc RUN=$DIR/run LOG=$DIR/log
DB_PORT=${HARNESS_DB_PORT:-13306}
DB_PASS=harness
CLUSTER=harness
ACCOUNT=local          # root's default account in the accounting database
MUNGE_SOCKET=/run/munge/munge.socket.2   # munge's compiled-in default; clients use it
NET=${HARNESS_NET:-10.213.0}
ADDR=$NET.1            # slurmctld and the test's services, on the bridge in the root namespace
BRIDGE=mnb-br0
CPU_NODES=(cpu1 cpu2 cpu3 cpu4 cpu5)
GPU_NODES=(gpu1 gpu2)
NODES=("${CPU_NODES[@]}" "${GPU_NODES[@]}")
declare -A NODE_ADDR=([cpu1]=$NET.11 [cpu2]=$NET.12 [cpu3]=$NET.13 [cpu4]=$NET.14 [cpu5]=$NET.15 [gpu1]=$NET.21 [gpu2]=$NET.22)
declare -A GPU_TYPE=([gpu1]=t4 [gpu2]=a100)   # GRES type per GPU node: gpu_models [t4, a100]
ns_of() { echo "mnb-$1"; }   # a node's network namespace, and its veth end in the root namespace
# Why these packages: slurm-client has sbatch/sacct/squeue; slurmdbd pulls the
# mysql accounting plugin. mariadb-server-core + -client-core give mariadbd,
# mariadb-install-db and the mariadb client without the full mariadb-server
# (which drags in perl, galera, rsync... and a service that wants to start).
# iproute2 (ip) and util-linux (nsenter, unshare) build the nodes' namespaces.
PACKAGES=(slurmctld slurmd slurm-client slurmdbd munge mariadb-server-core mariadb-client-core iproute2 util-linux)

# ---- PID helpers: only ever signal PIDs read from our own PID files ---------------
# munged runs as user 'munge', so its PID file lives in a munge-owned subfolder. A node's
# slurmd is NAME slurmd-<node> (slurm.conf: SlurmdPidFile=$RUN/slurmd-%n.pid).
pidfile() { if [ "$1" = munged ]; then echo "$RUN/munge/munged.pid"; else echo "$RUN/$1.pid"; fi; }
pid_of() {  # NAME -> prints the PID if its PID file exists, it is alive and its comm is NAME's daemon
  local f pid
  f=$(pidfile "$1")
  [ -s "$f" ] || return 1
  pid=$(tr -dc '0-9' < "$f")
  [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
  [ "$(cat "/proc/$pid/comm")" = "${1%%-*}" ] || return 1   # guards against PID reuse
  echo "$pid"
}
# Stop a group of our daemons together: SIGTERM all, wait up to 10 s, then SIGKILL.
stop_group() {
  local name pid pids=() i alive
  for name in "$@"; do
    if pid=$(pid_of "$name"); then log "stopping $name (pid $pid)"; kill "$pid" 2>/dev/null || true; pids+=("$pid"); fi
  done
  for i in $(seq 1 100); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then log "pid $pid did not exit, SIGKILL"; kill -9 "$pid" 2>/dev/null || true; fi
  done
  for name in "$@"; do rm -f "$(pidfile "$name")"; done
}

# /etc/slurm/X -> $ETC/X. A real file there is somebody else's cluster: refuse.
link_conf() {
  local dst=/etc/slurm/$1
  if [ -e "$dst" ] && [ ! -L "$dst" ]; then
    die "$dst exists and is not a symlink (a real Slurm config?); refusing to replace it"
  fi
  ln -sfn "$ETC/$1" "$dst"
}
unlink_conf() {  # only remove links that point into this STATEDIR
  local dst=/etc/slurm/$1
  if [ -L "$dst" ] && [ "$(readlink "$dst")" = "$ETC/$1" ]; then rm -f "$dst"; fi
}

SLURMDS=("${NODES[@]/#/slurmd-}")   # slurmd-cpu1 ... slurmd-gpu2

# ---- the nodes' network: recorded in $DIR/net as it is made, so that stop removes exactly that --
created() { echo "$1 $2" >> "$DIR/net"; }   # KIND NAME: netns mnb-cpu1, link mnb-br0
has_ns() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }
net_down() {
  local kind name
  [ -s "$DIR/net" ] || return 0
  # Namespaces first (deleting one deletes the veth pair in it), then the bridge.
  while read -r kind name; do
    if [ "$kind" = netns ] && has_ns "$name"; then log "deleting namespace $name"; ip netns del "$name" || true; fi
  done < "$DIR/net"
  while read -r kind name; do
    if [ "$kind" = link ] && ip link show "$name" >/dev/null 2>&1; then log "deleting link $name"; ip link del "$name" || true; fi
  done < "$DIR/net"
  rm -f "$DIR/net"
}

show_status() {
  local n p
  for n in munged mariadbd slurmdbd slurmctld "${SLURMDS[@]}"; do
    if p=$(pid_of "$n"); then echo "$n pid=$p"; else echo "$n not running"; fi
  done
  sinfo -o '%P %a %D %T %c %m %G' 2>/dev/null || true
}

# ======================================================================== stop ===
if [ "$ACTION" = stop ]; then
  if pid_of slurmctld >/dev/null; then
    jobs=$(squeue -h -o %i 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      log "cancelling jobs: $(echo $jobs)"
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
    fi
    # Wait until no job is left (COMPLETING included), so that their slurmstepd
    # processes have exited before slurmd goes: nothing of ours stays behind.
    for _ in $(seq 1 60); do
      [ -z "$(squeue -h -t all -o '%i %T' 2>/dev/null | grep -vE ' (COMPLETED|CANCELLED|FAILED|TIMEOUT|OUT_OF_MEMORY|NODE_FAIL|BOOT_FAIL|DEADLINE|PREEMPTED)$' || true)" ] && break
      sleep 0.5
    done
  fi
  # In dependency order (slurmctld reports to slurmdbd while it shuts down,
  # slurmdbd writes to MariaDB, all of them authenticate through munge); each
  # group in parallel, which halves the time of stopping one by one.
  stop_group "${SLURMDS[@]}" slurmctld
  stop_group slurmdbd
  stop_group mariadbd munged
  net_down
  for f in slurm.conf gres.conf slurmdbd.conf; do unlink_conf "$f"; done
  log "stopped, namespaces and links removed (state kept in $DIR)"
  exit 0
fi
if [ "$ACTION" = status ]; then show_status; exit 0; fi

# ======================================================================= start ===
T0=$(date +%s.%N)
mkdir -p "$ETC" "$RUN" "$LOG" "$DIR/state" "$DIR/spool" "$DIR/fakegpu"
chmod 755 "$DIR" "$RUN"

# ---- 1. packages (skipped when all binaries are there: the fast path) -----------
have_all() {
  local b
  for b in slurmctld slurmd slurmdbd sinfo sbatch sacct sacctmgr scontrol munged munge unmunge mariadbd mariadb-install-db mariadb ip nsenter unshare; do
    command -v "$b" >/dev/null 2>&1 || return 1
  done
  ls /usr/lib/*/slurm-wlm/accounting_storage_mysql.so >/dev/null 2>&1
}
if ! have_all; then
  command -v apt-get >/dev/null || skip "no apt-get: Slurm packages cannot be installed on this machine"
  log "installing ${PACKAGES[*]} (log: $LOG/apt.log)"
  export DEBIAN_FRONTEND=noninteractive
  # Package scripts must not start the daemons (we start our own, with our
  # configs): policy-rc.d answering 101 forbids it. Only add one if none exists.
  added_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; added_policy=1
  fi
  apt_install() { apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${PACKAGES[@]}" >>"$LOG/apt.log" 2>&1; }
  # Try without `apt-get update` first (fast when the lists are current), then with it.
  ok=0
  apt_install && ok=1 || { apt-get -o DPkg::Lock::Timeout=300 update >>"$LOG/apt.log" 2>&1 && apt_install && ok=1; } || true
  [ "$added_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  if [ "$ok" != 1 ]; then
    skip "apt-get could not install ${PACKAGES[*]} (no package registry?): $(grep -E '^(E|Err):' "$LOG/apt.log" | tail -1)"
  fi
  have_all || skip "Slurm packages installed but binaries missing (not Debian 12?)"
fi
T1=$(date +%s.%N)

# ---- 2. the nodes' network ---------------------------------------------------------------
# One bridge in the root namespace; per node a namespace and a veth pair, one end (mnb-<node>) on
# the bridge, the other (eth0) in the namespace. No default route: the nodes reach only 10.213.0/24.
net_fail() { ip netns del mnb-probe 2>/dev/null || true; net_down; skip "cannot create network namespaces, a bridge or veth pairs here (no CAP_NET_ADMIN?): $1"; }
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
  ip netns add mnb-probe 2>/dev/null || net_fail "ip netns add failed"
  ip netns del mnb-probe
  ip link add "$BRIDGE" type bridge 2>/dev/null || net_fail "ip link add type bridge failed"
  created link "$BRIDGE"
  ip addr add "$ADDR/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
fi
for n in "${NODES[@]}"; do
  ns=$(ns_of "$n")
  has_ns "$ns" && continue
  ip netns add "$ns" || die "ip netns add $ns failed"
  created netns "$ns"
  ip link add "$ns" type veth peer name eth0 netns "$ns" 2>/dev/null || net_fail "ip link add type veth failed"
  ip link set "$ns" master "$BRIDGE" up
  ip -n "$ns" addr add "${NODE_ADDR[$n]}/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
done

# ---- 3. configs --------------------------------------------------------------------------
CTL=$(hostname -s)     # slurmctld checks that it runs on SlurmctldHost
# `slurmd -C` prints this host's real layout, e.g.
# "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105"
HW=$(slurmd -C | sed -n -E '1s/^NodeName=[^ ]+ //p')
[ -n "$HW" ] || die "slurmd -C printed no node layout"

# Fake GPUs: character devices that are clones of /dev/null (major 1, minor 3), GPUS_PER_NODE per
# GPU node (two: a GPU job and another that needs a GPU, e.g. preload, fit on one node at once).
# slurmd only needs the GRES File= to exist; jobs that get one see CUDA_VISIBLE_DEVICES=0 but no
# CUDA, which is what the tests expect.
GPUS_PER_NODE=2
for i in $(seq 0 $((${#GPU_NODES[@]} * GPUS_PER_NODE - 1))); do
  [ -c "$DIR/fakegpu/nvidia$i" ] || mknod "$DIR/fakegpu/nvidia$i" c 1 3 \
    || die "mknod failed (STATEDIR on a nodev mount?); cannot create the fake GPU device"
done
for n in "${NODES[@]}"; do mkdir -p "$DIR/spool/$n"; done

# Why these settings:
#  - SlurmUser/SlurmdUser root: no 'slurm' user setup needed, all files are ours.
#  - ProctrackType linuxproc + JobAcctGather none: nothing uses cgroups, which
#    containers and CI runners often lack (so no cgroup.conf is needed or written).
#  - TaskPlugin task/none: the nodes share this machine's cores (see the header).
#  - select/cons_tres CR_Core: cores and GRES are consumable, so --cpus-per-task
#    and --gpus are real allocations (two jobs never get the same core or GPU),
#    and --exclusive gives a job a whole node.
#  - AccountingStorageTRES=gres/gpu,gres/gpu:<types>: sacct's ReqTRES/AllocTRES
#    then show the GPU request of each job, with its type.
#  - AccountingStoreFlags=job_comment: the plugin puts "rule_<rule>_wildcards_..."
#    in --comment; storing it lets the tests map each Slurm job to its rule.
#  - MinJobAge 300: finished jobs stay visible to squeue/scontrol for 5 min too.
#  - ReturnToService 2: a node found DOWN after a restart comes back by itself.
#  - %n in the slurmd paths: each node has its own spool, PID file and log.
gres_tres=gres/gpu
for n in "${GPU_NODES[@]}"; do gres_tres+=",gres/gpu:${GPU_TYPE[$n]}"; done
{
cat <<EOF
# generated by tests/slurm/harness.sh - do not edit (rewritten on each start)
ClusterName=$CLUSTER
SlurmctldHost=$CTL($ADDR)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
AccountingStorageTRES=$gres_tres
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=300
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd-%n.log
SlurmctldPort=6817
SlurmdPort=6818
GresTypes=gpu
EOF
for n in "${CPU_NODES[@]}"; do echo "NodeName=$n NodeAddr=${NODE_ADDR[$n]} $HW State=UNKNOWN"; done
for n in "${GPU_NODES[@]}"; do echo "NodeName=$n NodeAddr=${NODE_ADDR[$n]} $HW Gres=gpu:${GPU_TYPE[$n]}:$GPUS_PER_NODE State=UNKNOWN"; done
echo "PartitionName=cpu Nodes=$(IFS=,; echo "${CPU_NODES[*]}") Default=YES MaxTime=INFINITE State=UP"
echo "PartitionName=gpu Nodes=$(IFS=,; echo "${GPU_NODES[*]}") Default=NO MaxTime=INFINITE State=UP"
} > "$ETC/slurm.conf"
i=0
for n in "${GPU_NODES[@]}"; do
  echo "NodeName=$n Name=gpu Type=${GPU_TYPE[$n]} File=$DIR/fakegpu/nvidia[$i-$((i + GPUS_PER_NODE - 1))]"
  i=$((i + GPUS_PER_NODE))
done > "$ETC/gres.conf"
# slurmdbd refuses a config readable by others (it holds the DB password).
( umask 077; cat > "$ETC/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
LogFile=$LOG/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
)
chmod 600 "$ETC/slurmdbd.conf"
printf 'export SLURM_CONF=%s\nexport HARNESS_ADDR=%s\n' "$ETC/slurm.conf" "$ADDR" > "$DIR/env"
mkdir -p /etc/slurm
link_conf slurm.conf
link_conf gres.conf
link_conf slurmdbd.conf

# ---- 4. munge (authentication between all Slurm parts) -----------------------------
if [ ! -s /etc/munge/munge.key ]; then
  mkdir -p /etc/munge
  mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null \
    || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
fi
chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
mkdir -p /run/munge; chown munge:munge /run/munge; chmod 755 /run/munge
munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
if pid_of munged >/dev/null; then :
elif munge_ok; then
  # Somebody else's munged (e.g. a system service) serves the default socket:
  # use it, and since it is not ours, `stop` leaves it alone.
  log "reusing a munged not started by this harness on $MUNGE_SOCKET"
else
  rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock"
  mkdir -p "$LOG/munge"; chown munge:munge "$LOG/munge"; chmod 700 "$LOG/munge"
  mkdir -p "$RUN/munge"; chown munge:munge "$RUN/munge"; chmod 755 "$RUN/munge"
  # munged runs as user munge: every folder above STATEDIR must be searchable by it
  # (pytest's tmp_path, under a 0700 /tmp/pytest-of-root, is not).
  runuser -u munge -- test -w "$LOG/munge" -a -w "$RUN/munge" \
    || die "user munge cannot write to $LOG/munge: a folder above $DIR is not searchable by others; use a STATEDIR under e.g. /tmp"
  runuser -u munge -- /usr/sbin/munged --pid-file="$RUN/munge/munged.pid" --log-file="$LOG/munge/munged.log" \
    || die "munged failed to start (see $LOG/munge/munged.log)"
  for _ in $(seq 1 40); do munge_ok && break; sleep 0.25; done
fi
munge_ok || die "munge does not work (see $LOG/munge/munged.log)"

# ---- 5. MariaDB + slurmdbd (job accounting: sacct) ---------------------------------
MYSOCK=$RUN/mysqld.sock
db() { mariadb --no-defaults --socket="$MYSOCK" -u root "$@"; }
if ! pid_of mariadbd >/dev/null; then
  if [ ! -d "$DIR/mysql/mysql" ]; then
    mariadb-install-db --no-defaults --datadir="$DIR/mysql" --user=root \
      --auth-root-authentication-method=socket --skip-test-db >"$LOG/mariadb-install.log" 2>&1 \
      || die "mariadb-install-db failed, see $LOG/mariadb-install.log"
  fi
  # --user=root: mariadbd refuses to run as root unless told so explicitly.
  nohup /usr/sbin/mariadbd --no-defaults --datadir="$DIR/mysql" --user=root --socket="$MYSOCK" \
    --port="$DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve --pid-file="$RUN/mariadbd.pid" \
    --log-error="$LOG/mariadb.err" --innodb-buffer-pool-size=64M --innodb-lock-wait-timeout=900 \
    </dev/null >/dev/null 2>&1 &
  for _ in $(seq 1 120); do db -e 'select 1' >/dev/null 2>&1 && break; sleep 0.25; done
  db -e 'select 1' >/dev/null 2>&1 || die "mariadbd did not start, see $LOG/mariadb.err"
fi
db <<EOF
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
FLUSH PRIVILEGES;
EOF
pid_of slurmdbd >/dev/null || slurmdbd || die "slurmdbd failed, see $LOG/slurmdbd.log"
for _ in $(seq 1 120); do sacctmgr -n list cluster format=cluster >/dev/null 2>&1 && break; sleep 0.25; done
sacctmgr -n list cluster format=cluster >/dev/null 2>&1 || die "slurmdbd not answering, see $LOG/slurmdbd.log"
# Register cluster, account and root's association (once; the DB persists in STATEDIR).
sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
sacctmgr -n -P list account format=account | grep -qx "$ACCOUNT" \
  || sacctmgr -i add account "$ACCOUNT" Description=harness Organization=harness >/dev/null
sacctmgr -n -P list assoc user=root account="$ACCOUNT" format=account | grep -qx "$ACCOUNT" \
  || sacctmgr -i add user root Account="$ACCOUNT" DefaultAccount="$ACCOUNT" >/dev/null

# ---- 6. slurmctld + one slurmd per node ---------------------------------------------------
pid_of slurmctld >/dev/null || slurmctld || die "slurmctld failed, see $LOG/slurmctld.log"
for _ in $(seq 1 80); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.25; done
# Each slurmd in its node's network namespace and in a UTS namespace of its own, named as the
# node: jobs there see that host name (the benchmark records it as the run's host). nsenter, not
# `ip netns exec`: the latter also remounts /sys, hiding /sys/fs/cgroup, without which slurmd
# refuses to start.
for n in "${NODES[@]}"; do
  pid_of "slurmd-$n" >/dev/null && continue
  nsenter --net="/run/netns/$(ns_of "$n")" unshare --uts sh -c "hostname $n && exec slurmd -N $n" \
    || die "slurmd of $n failed, see $LOG/slurmd-$n.log"
done

states=""
for i in $(seq 1 240); do
  states=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u || true)
  not_up=$(echo "$states" | grep -vE ' (idle|mixed|allocated)$' || true)
  [ -n "$states" ] && [ -z "$not_up" ] && [ "$(echo "$states" | wc -l)" -eq "${#NODES[@]}" ] && break
  if [ "$i" -eq 20 ] && echo "$not_up" | grep -qE '(drain|inval|down)'; then   # ReturnToService=2 should do it; nudge once if not
    for n in $(echo "$not_up" | awk '{print $1}'); do
      log "node $n: $(scontrol show node "$n" | grep -o 'Reason=.*' || true); resuming"
      scontrol update nodename="$n" state=resume 2>/dev/null || true
    done
  fi
  sleep 0.25
done
[ -n "$states" ] && [ -z "$not_up" ] || die "nodes not idle: $(echo $not_up), see $LOG/"
T2=$(date +%s.%N)

log "up: install $(awk "BEGIN{printf \"%.1f\", $T1-$T0}")s, start $(awk "BEGIN{printf \"%.1f\", $T2-$T1}")s;" \
    "${#NODES[@]} nodes on $BRIDGE ($ADDR/24); config $ETC/slurm.conf (linked from /etc/slurm)"
show_status >&2

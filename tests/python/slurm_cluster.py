"""A real single-node Slurm for the tests: munged with a key made here,
slurmctld and slurmd on localhost, every file (config, state, spool, logs,
the munge socket) in one folder, running as the current user. Debian's
slurm-wlm and munge (.ci/setup installs them). Nothing system-wide is
touched: clients find this cluster through SLURM_CONF."""

import os
import shutil
import socket
import subprocess
import time

TOOLS = ["munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _which(tool):
    for d in (os.environ.get("PATH", "") + ":/usr/sbin:/sbin").split(":"):
        p = os.path.join(d, tool)
        if d and os.access(p, os.X_OK):
            return p
    return None


class SlurmCluster:
    """Start with start(); env() is the environment that reaches it; stop() ends every daemon."""

    def __init__(self, folder):
        self.dir = str(folder)
        self.procs = []
        self.conf = os.path.join(self.dir, "slurm.conf")

    def env(self):
        return dict(os.environ, SLURM_CONF=self.conf)

    def missing_tools(self):
        return [t for t in TOOLS if not _which(t)]

    def _daemon(self, name, argv):
        log = open(os.path.join(self.dir, name + ".out"), "w")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env(), start_new_session=True)
        self.procs.append((name, p))
        return p

    def _start_munge(self):
        m = os.path.join(self.dir, "munge")
        os.makedirs(m, mode=0o700)
        key = os.path.join(m, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o600)
        os.chmod(self.dir, 0o755)  # munged wants its socket's folders searchable by everyone
        os.chmod(m, 0o755)
        self.socket = os.path.join(m, "socket")
        self._daemon("munged", [_which("munged"), "--foreground", "--force", "--key-file=" + key,
                                "--socket=" + self.socket, "--pid-file=" + os.path.join(m, "pid"),
                                "--log-file=" + os.path.join(m, "log"), "--seed-file=" + os.path.join(m, "seed")])
        self._wait(lambda: os.path.exists(self.socket), 20, "munged did not create its socket")

    def _write_conf(self):
        host = socket.gethostname().split(".")[0]
        for d in ("state", "spool", "log"):
            os.makedirs(os.path.join(self.dir, d))
        j = lambda *p: os.path.join(self.dir, *p)
        conf = """ClusterName=kvtiertest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={cport}
SlurmdPort={dport}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
SlurmUser={user}
SlurmdUser={user}
StateSaveLocation={state}
SlurmdSpoolDir={spool}
SlurmctldPidFile={ctldpid}
SlurmdPidFile={dpid}
SlurmctldLogFile={ctldlog}
SlurmdLogFile={dlog}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MinJobAge=2
NodeName=kvtiernode NodeHostname={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=kvtier Nodes=kvtiernode Default=YES MaxTime=INFINITE State=UP
""".format(host=host, cport=_free_port(), dport=_free_port(), sock=self.socket,
           user=subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip(),
           state=j("state"), spool=j("spool"), ctldpid=j("slurmctld.pid"), dpid=j("slurmd.pid"),
           ctldlog=j("log", "slurmctld.log"), dlog=j("log", "slurmd.log"), cpus=os.cpu_count() or 1)
        with open(self.conf, "w") as f:
            f.write(conf)

    def _wait(self, ok, seconds, what):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if ok():
                return
            for name, p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError("%s exited %d: %s" % (name, p.returncode, self.log_tail(name)))
            time.sleep(0.2)
        raise RuntimeError(what)

    def log_tail(self, name):
        for f in (os.path.join(self.dir, name + ".out"), os.path.join(self.dir, "log", name + ".log")):
            if os.path.exists(f) and os.path.getsize(f):
                return open(f, errors="replace").read()[-600:].replace("\n", " | ")
        return ""

    def idle(self):
        p = subprocess.run([_which("sinfo"), "--noheader", "--format=%T"], capture_output=True, text=True,
                           env=self.env())
        return p.returncode == 0 and p.stdout.strip() == "idle"

    def start(self):
        """Starts munged, slurmctld and slurmd; raises RuntimeError saying why it could not."""
        missing = self.missing_tools()
        if missing:
            raise RuntimeError("not installed: %s (Debian: apt install slurm-wlm munge)" % ", ".join(missing))
        self._start_munge()
        self._write_conf()
        self._daemon("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", self.conf])
        self._daemon("slurmd", [_which("slurmd"), "-D", "-f", self.conf, "-N", "kvtiernode"])
        try:
            self._wait(self.idle, 60, "the node did not come up idle in 60 s: " + self.log_tail("slurmctld"))
        except RuntimeError:
            self.stop()
            raise

    def queue(self):
        """The job ids (with array task ids) Slurm still has pending or running."""
        p = subprocess.run([_which("squeue"), "--noheader", "--format=%i"], capture_output=True, text=True,
                           env=self.env())
        return p.stdout.split()

    def stop(self):
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []

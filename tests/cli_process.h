// The csdkit command as a child process a test can stop at a named point (CSDKIT_TEST_PAUSE,
// csdkit/platform/pause_point.h), run something else against, and let go on: concurrent use made
// deterministic. Output (stdout and stderr) goes to a file, so a stopped child never blocks on a
// full pipe. Each test target defines CSDKIT_CLI (the built csdkit).
#ifndef CSDKIT_TESTS_CLI_PROCESS_H_
#define CSDKIT_TESTS_CLI_PROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace csdkit::testing {

class CliProcess {
 public:
  /// Starts `csdkit args...`, its output into `out_file`; with `pause`, it stops itself at the
  /// pause point of that name.
  CliProcess(const std::vector<std::string>& args, const std::string& out_file,
             const std::string& pause = "")
      : out_file_(out_file) {
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) ::_exit(126);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      if (pause.empty()) {
        ::unsetenv("CSDKIT_TEST_PAUSE");
      } else {
        ::setenv("CSDKIT_TEST_PAUSE", pause.c_str(), 1);
      }
      std::vector<char*> argv{const_cast<char*>(CSDKIT_CLI)};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(CSDKIT_CLI, argv.data());
      ::_exit(127);
    }
  }
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;
  ~CliProcess() {
    if (pid_ > 0 && !done_) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
  }

  pid_t pid() const { return pid_; }

  /// Waits until the child stopped at its pause point (true) or ended first (false: then
  /// status() is its exit status).
  bool WaitStopped() {
    int st = 0;
    if (::waitpid(pid_, &st, WUNTRACED) != pid_) return false;
    if (WIFSTOPPED(st)) return true;
    Finish(st);
    return false;
  }
  /// Lets a stopped child go on.
  void Continue() { ::kill(pid_, SIGCONT); }
  /// Kills the child (SIGKILL) and reaps it.
  void Kill() {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    Finish(st);
  }
  /// Waits for the end, at most `limit` (then kills it: status -2); returns the exit status
  /// (-1 when a signal ended it).
  int Wait(std::chrono::seconds limit = std::chrono::seconds(300)) {
    if (done_) return status_;
    const auto end = std::chrono::steady_clock::now() + limit;
    for (;;) {
      int st = 0;
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_ && !WIFSTOPPED(st)) {
        Finish(st);
        return status_;
      }
      if (std::chrono::steady_clock::now() > end) {
        Kill();
        status_ = -2;
        return status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  int status() const { return status_; }
  /// The child's output so far.
  std::string Output() const {
    std::ifstream f(out_file_);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

 private:
  void Finish(int st) {
    done_ = true;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }

  std::string out_file_;
  pid_t pid_ = -1;
  bool done_ = false;
  int status_ = -1;
};

/// Runs `csdkit args...` to its end (at most `limit`), returning exit status and output.
struct CliResult {
  int status = -1;
  std::string out;
};
inline CliResult RunCsdkit(const std::vector<std::string>& args, const std::string& out_file,
                           std::chrono::seconds limit = std::chrono::seconds(300)) {
  CliProcess p(args, out_file);
  CliResult r;
  r.status = p.Wait(limit);
  r.out = p.Output();
  return r;
}

}  // namespace csdkit::testing

#endif  // CSDKIT_TESTS_CLI_PROCESS_H_

;;; emacs_install.el --- the first-run check of editors/emacs/jaxlsp.el in batch mode  -*- lexical-binding: t; -*-

;; Run as `emacs --batch -Q -l emacs_install.el' with JAXLSP_EMACS_CONFIG naming a JSON file:
;; {plugin, file, mode, command, report}.
;; mode "missing": no server installed: starting eglot on a Python file says, once, that the
;;   server is not on PATH and the command that installs it.
;; mode "nojax": `jaxlsp-command' names an installed server, the project is trusted and its .venv
;;   has no JAX: one message names the interpreter, what it lacks and the install command.
;; Messages are recorded.  Writes a JSON report; exits 0 on success, 1 on failure.

;;; Code:

(require 'cl-lib)
(require 'json)

(defvar config (json-parse-string
                (with-temp-buffer
                  (insert-file-contents (getenv "JAXLSP_EMACS_CONFIG"))
                  (buffer-string))
                :object-type 'plist))
(defvar report (make-hash-table :test #'equal))
(defvar messages nil)
(defvar wait-factor
  (let ((told (string-to-number (or (getenv "JAXLSP_TEST_WAIT_FACTOR") ""))))
    (if (> told 0) told 1)))

(advice-add 'message :before
            (lambda (format &rest args)
              (when format (push (apply #'format-message format args) messages))))

(defun wait-for (what seconds predicate)
  (let ((deadline (+ (float-time) (* seconds wait-factor))))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (unless (funcall predicate)
      (error "timed out waiting for %s" what))))

(defun load-package ()
  (setq package-directory-list (list "/usr/share/emacs/site-lisp/elpa"))
  (package-initialize)
  (require 'eglot)
  (add-to-list 'load-path (plist-get config :plugin))
  (require 'jaxlsp)
  (setq eglot-sync-connect t eglot-connect-timeout (round (* 30 wait-factor)) eglot-autoshutdown t)
  (puthash "emacs" emacs-version report))

(defun run-missing ()
  (load-package)
  (jaxlsp-setup)
  (find-file (plist-get config :file))
  (puthash "error" (condition-case err
                       (progn (apply #'eglot (eglot--guess-contact)) "started")
                     (error (error-message-string err)))
           report)
  (puthash "server" (if (eglot-current-server) t :json-false) report))

(defun run-nojax ()
  (load-package)
  (setq jaxlsp-command (append (plist-get config :command) nil)
        jaxlsp-trusted-directories (list (plist-get config :root)))
  (jaxlsp-setup)
  (find-file (plist-get config :file))
  (apply #'eglot (eglot--guess-contact))
  (wait-for "the first-run message" 120
            (lambda () (cl-some (lambda (m) (string-match-p "cannot trace" m)) messages))))

(condition-case err
    (progn
      (pcase (plist-get config :mode)
        ("missing" (run-missing))
        (_ (run-nojax)))
      (puthash "ok" t report))
  ((error quit) (puthash "ok" :json-false report)
   (puthash "failure" (format "%s: %s" (car err) (error-message-string err)) report)))
(puthash "messages" (vconcat (reverse messages)) report)
(ignore-errors (let ((server (eglot-current-server))) (when server (eglot-shutdown server))))
(with-temp-file (plist-get config :report)
  (insert (json-encode report)))
(kill-emacs (if (eq (gethash "ok" report) t) 0 1))

;;; emacs_install.el ends here

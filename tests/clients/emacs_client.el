;;; emacs_client.el --- drive editors/emacs/jaxlsp.el in Emacs batch mode  -*- lexical-binding: t; -*-

;; Run as `emacs --batch -Q -l emacs_client.el' with JAXLSP_EMACS_CONFIG naming a JSON file:
;; {plugin, root, file, mode, report, predict_def_line, needs_line}.
;; mode "full": `jaxlsp-setup' with the root in `jaxlsp-trusted-directories', eglot started from
;; `eglot-server-programs'; the "Trace graph" code action chosen through `eglot-code-actions',
;; `jaxlsp-outline' (RET on the jit group, RET on dot_general), hover, `jaxlsp-node-at-point',
;; `jaxlsp-open-graph', `jaxlsp-trace' on an entrypoint that needs input.
;; mode "trust": no trusted directories; the server's trust prompt is answered "Cancel".
;; mode "hostile": a project that shadows the server's modules and holds a recording .venv.
;; Only the user's side is stubbed (minibuffer answers, `browse-url').  Writes a JSON report and
;; exits 0 on success, 1 on failure.

;;; Code:

(require 'cl-lib)
(require 'json)
(require 'subr-x)

(defvar config (json-parse-string
                (with-temp-buffer
                  (insert-file-contents (getenv "JAXLSP_EMACS_CONFIG"))
                  (buffer-string))
                :object-type 'plist))
(defvar report (make-hash-table :test #'equal))
(defvar started (float-time))
(defvar steps nil)
(defvar messages nil)
(defvar minibuffer-answers nil "Queued answers for `read-from-minibuffer'.")
(defvar completing-answers nil "Alist (PROMPT-REGEXP . ANSWER) for `completing-read'.")
(defvar prompts nil "Every prompt the user saw.")
(defvar opened nil "URLs given to `browse-url'.")

(defun rput (key value) (puthash key value report))
(defun step (name)
  (push (list (cons "name" name) (cons "ms" (round (* 1000 (- (float-time) started))))) steps))
(defun check (condition what) (unless condition (error "%s" what)))

(defvar wait-factor
  (let ((told (string-to-number (or (getenv "JAXLSP_TEST_WAIT_FACTOR") ""))))
    (if (> told 0) told 1))
  "Waits are deadlines in seconds on the reference machine, times this: the factor the test
measured when it started Emacs (tests/deadlines.py; run_editor puts it in JAXLSP_TEST_WAIT_FACTOR).")

(defun wait-for (what seconds predicate)
  "Wait (bounded by SECONDS on the reference machine, times `wait-factor') for PREDICATE,
feeding process output; fail with WHAT."
  (let* ((seconds (* seconds wait-factor))
         (deadline (+ (float-time) seconds)))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (unless (funcall predicate)
      (error "timed out after %.0fs waiting for %s" seconds what))))

(defun line0 () (1- (line-number-at-pos)))

(defun goto-line0 (line)
  (goto-char (point-min))
  (forward-line line))

;; The user's side: answers from the queues, every prompt recorded.
(advice-add 'read-from-minibuffer :override
            (lambda (prompt &rest _)
              (push prompt prompts)
              (or (pop minibuffer-answers) (signal 'quit nil))))
(advice-add 'completing-read :override
            (lambda (prompt collection &rest _)
              (push prompt prompts)
              (let ((answer (cl-loop for (re . answer) in completing-answers
                                     when (string-match-p re prompt) return answer)))
                (unless answer (signal 'quit nil))
                (if (functionp answer) (funcall answer collection) answer))))
(advice-add 'y-or-n-p :override
            (lambda (prompt)
              (push prompt prompts)
              (let ((answer (pop minibuffer-answers)))
                (equal answer "y"))))
(setq browse-url-browser-function (lambda (url &rest _) (push url opened)))
(advice-add 'message :before
            (lambda (format &rest args)
              (when format (push (apply #'format-message format args) messages))))

(defun start-eglot (&optional how)
  "Load eglot 1.9 (Debian's elpa-eglot) and the package, open the file, start the server.
HOW `start': `jaxlsp-start' (nothing registered); else `jaxlsp-setup' and `M-x eglot'."
  ;; -Q leaves site-lisp off the load path: point package.el at Debian's elpa packages.
  (setq package-directory-list (list "/usr/share/emacs/site-lisp/elpa"))
  (package-initialize)
  (require 'eglot)
  (add-to-list 'load-path (plist-get config :plugin))
  (require 'jaxlsp)
  (setq eglot-sync-connect t
        eglot-connect-timeout (round (* 30 wait-factor))
        eglot-autoshutdown t)
  (rput "eglot" (if (boundp 'eglot--version) eglot--version "1.9"))
  (rput "emacs" emacs-version)
  (unless (eq how 'start) (jaxlsp-setup))
  (find-file (plist-get config :file))
  (check (derived-mode-p 'python-mode) (format "major mode: %s" major-mode))
  (if (eq how 'start)
      (jaxlsp-start)
    ;; The contact comes from `eglot-server-programs', as `M-x eglot' would find it.
    (apply #'eglot (eglot--guess-contact)))
  (rput "registered" (and (rassq #'jaxlsp-contact eglot-server-programs) t))
  (let ((server (eglot-current-server)))
    (check (and server (object-of-class-p server 'jaxlsp-server)) "no jaxlsp server for the buffer")
    (rput "server_class" (symbol-name (eieio-object-class server)))
    (rput "init_options" (eglot-initialization-options server))
    (step "connected")
    server))

(defun trace-fields (trace)
  (let ((summary (plist-get trace :summary)))
    (list (cons "traceId" (plist-get trace :trace-id))
          (cons "name" (plist-get trace :name))
          (cons "outputs" (plist-get summary :outputs))
          (cons "ops" (plist-get summary :ops)))))

(defun run-full ()
  (setq jaxlsp-trusted-directories (list (plist-get config :root))
        jaxlsp-live-shapes nil)  ; explicit traces only (live shapes would trace on open)
  (let* ((server (start-eglot))
         (source (current-buffer))
         (traced nil))
    (add-hook 'jaxlsp-after-trace-functions (lambda (trace) (setq traced trace)))
    ;; The "Trace graph" code action, chosen the way a user picks it in `eglot-code-actions'.
    (goto-line0 (plist-get config :predict_def_line))
    (let ((actions (eglot-code-actions (point) (point))))
      (rput "actions" (vconcat (mapcar (lambda (a) (plist-get a :title)) actions))))
    (setq completing-answers '(("Pick an action" . "Trace graph: predict")))
    (let ((last-nonmenu-event ?\r)) ; a keyboard event: completing-read, not a popup menu
      (eglot-code-actions (point) nil nil t))
    (wait-for "the code action's trace" 90 (lambda () traced))
    (rput "trace" (trace-fields traced))
    (step "traced")

    ;; Traced: the def line also offers "Open graph" (eglot has no lenses, and no showDocument).
    (goto-line0 (plist-get config :predict_def_line))
    (let ((actions (eglot-code-actions (point) (point))))
      (rput "actions_after" (vconcat (mapcar (lambda (a) (plist-get a :title)) actions))))
    (setq completing-answers '(("Pick an action" . "Open graph: predict")))
    (let ((last-nonmenu-event ?\r))
      (eglot-code-actions (point) nil nil t))
    (rput "opened_by_action" (vconcat opened))
    (setq opened nil)
    (step "open graph action")

    ;; The outline: the jit group at the top level, expanded by RET, then RET on dot_general.
    (let ((outline (jaxlsp-outline)))
      (with-current-buffer outline
        (rput "outline_mode" (symbol-name major-mode))
        (rput "outline_top" (split-string (buffer-string) "\n" t))
        (goto-char (point-min))
        (check (re-search-forward "^▸ jit" nil t) "no collapsed jit group in the outline")
        (execute-kbd-macro (kbd "RET"))
        (rput "outline_expanded" (split-string (buffer-string) "\n" t))
        (goto-char (point-min))
        (check (re-search-forward "dot_general" nil t) "no dot_general after expanding")
        (let ((node (jaxlsp--entry-item (get-text-property (point) 'jaxlsp-entry))))
          (rput "node_source_line" (plist-get (plist-get node :source) :line)))
        (step "outline")
        (execute-kbd-macro (kbd "RET")))
      ;; Where the user now looks: the selected window, its buffer and point.
      (set-buffer (window-buffer (selected-window)))
      (goto-char (window-point (selected-window)))
      (rput "reveal_buffer" (buffer-name (current-buffer)))
      (rput "reveal_line" (line-number-at-pos))
      (rput "reveal_in_source" (eq (current-buffer) source))
      (rput "outline_visible" (and (get-buffer-window outline) t))
      (step "revealed"))

    ;; Hover on the revealed line (eglot's own request), then the traced ops on it.
    (let ((hover (jsonrpc-request server :textDocument/hover (eglot--TextDocumentPositionParams))))
      (rput "hover" (plist-get (plist-get hover :contents) :value)))
    (rput "node_at" (vconcat (jaxlsp-node-at-point)))
    (step "hover")

    ;; M-x jaxlsp-learn-shapes through the real server: on a folder with no test, its answer is
    ;; the server's refusal, shown as a message (a real run would run the project's tests).
    (let* ((said nil)
           (keep (lambda (&rest args) (when (car args) (push (apply #'format args) said))))
           (empty (expand-file-name "empty" (project-root (eglot--project server)))))
      (make-directory empty t)
      (advice-add 'message :after keep)
      (unwind-protect
          (progn
            (rput "learn_interactive" (if (commandp 'jaxlsp-learn-shapes) t :json-false))
            (jaxlsp-learn-shapes (eglot--path-to-uri empty) server)
            (wait-for "the learn answer" 60
                      (lambda () (cl-find-if (lambda (m) (string-prefix-p "jaxlsp: learning shapes: " m)) said)))
            (rput "learn_message" (cl-find-if (lambda (m) (string-prefix-p "jaxlsp: learning shapes: " m)) said)))
        (advice-remove 'message keep)))
    (step "learn")

    ;; Point resting on another line: one jaxlsp/cursorMoved, none when it rests again there.
    (let ((sent 0))
      (advice-add 'jsonrpc-notify :before
                  (lambda (_conn method &rest _) (when (eq method :jaxlsp/cursorMoved) (cl-incf sent))))
      (forward-line 1)
      (jaxlsp--send-cursor (current-buffer))
      (jaxlsp--send-cursor (current-buffer))
      (rput "cursor_moved" sent)
      (rput "cursor_hook" (and (memq #'jaxlsp--schedule-cursor post-command-hook) t)))

    (rput "graph_url" (jaxlsp-open-graph))
    (rput "opened" (vconcat opened))
    (step "graph")

    ;; An entrypoint that needs input: the shape read from the minibuffer, then save.
    (goto-line0 (1+ (plist-get config :needs_line)))
    ;; "1.5" does not parse: the server says so and the shape is read again ("3"); saved once.
    (setq traced nil minibuffer-answers '("1.5" "y" "3"))
    (let ((done nil))
      (jaxlsp-trace nil :callback (lambda (err _result) (setq done (or err t))))
      (wait-for "the needs-input trace" 60 (lambda () done))
      (rput "needs_error" (if (stringp done) done nil)))
    (rput "needs_trace" (if traced (trace-fields traced) nil))
    (step "needs input")))

(defun run-trust ()
  (setq jaxlsp-trusted-directories nil)
  (start-eglot 'start)
  (setq completing-answers '(("Trust" . "Cancel")))
  (let ((done nil))
    (jaxlsp-trace "predict" :callback (lambda (err _result) (setq done (or err t))))
    (wait-for "the refused trace" 30 (lambda () done))
    (rput "trace_error" (if (stringp done) done nil)))
  (step "refused"))

(defun run-hostile ()
  "The project shadows the server's modules and holds a recording .venv (the test made it so).
A user command \"python -m jaxlsp serve\" starts isolated and offers the trace action; the
project's own .venv/bin/jaxlsp is refused before trust."
  (setq jaxlsp-trusted-directories nil
        jaxlsp-command (list (plist-get config :python) "-m" "jaxlsp" "serve"))
  (let ((server (start-eglot)))
    (rput "command" (vconcat (process-command (jsonrpc--process server))))
    (goto-line0 (plist-get config :predict_def_line))
    (wait-for "the trace code action" 30
              (lambda () (cl-some (lambda (a) (equal (plist-get a :title) "Trace graph: predict"))
                                  (eglot-code-actions (point) (point)))))
    (rput "actions" (vconcat (mapcar (lambda (a) (plist-get a :title)) (eglot-code-actions (point) (point)))))
    (step "isolated server")
    (eglot-shutdown server))
  (setq jaxlsp-command (list (expand-file-name ".venv/bin/jaxlsp" (plist-get config :root)) "serve"))
  (rput "refused" (condition-case err
                      (progn (apply #'eglot (eglot--guess-contact)) nil)
                    (user-error (error-message-string err))))
  (rput "servers_after" (cl-count-if #'jsonrpc-running-p
                                     (apply #'append (hash-table-values eglot--servers-by-project))))
  (step "refused"))

(defun finish (ok &optional why)
  (rput "ok" (if ok t :json-false))
  (when why (rput "error" why))
  (rput "steps" (vconcat (reverse steps)))
  (rput "prompts" (vconcat (reverse prompts)))
  (rput "messages" (vconcat (last (reverse messages) 40)))
  ;; eglot's stderr and events buffers: what the server said, for a failure's explanation.
  (dolist (buffer (buffer-list))
    (when (string-match-p "EGLOT.*\\(stderr\\|events\\)" (buffer-name buffer))
      (with-current-buffer buffer
        (rput (if (string-match-p "stderr" (buffer-name buffer)) "server_stderr" "events")
              (buffer-substring-no-properties (max (point-min) (- (point-max) 3000)) (point-max))))))
  (ignore-errors (let ((server (eglot-current-server))) (when server (eglot-shutdown server))))
  (rput "elapsed_ms" (round (* 1000 (- (float-time) started))))
  (with-temp-file (plist-get config :report)
    (insert (let ((json-encoding-pretty-print nil)) (json-encode report))))
  (kill-emacs (if ok 0 1)))

(condition-case err
    (progn
      (pcase (plist-get config :mode)
        ("trust" (run-trust))
        ("hostile" (run-hostile))
        (_ (run-full)))
      (finish t))
  ((error quit) (finish nil (format "%s: %s" (car err) (error-message-string err)))))

;;; emacs_client.el ends here

;;; jaxlsp.el --- JAX graphs in Emacs through eglot and the jaxlsp server  -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9") (jsonrpc "1.0.14"))
;; Keywords: languages, tools
;; URL: https://github.com/jaxlsp/jaxlsp (editors/emacs)

;;; Commentary:

;; `jaxlsp-setup' registers `jaxlsp serve' with eglot for `python-mode' and `python-ts-mode'.
;; eglot has no code lenses: the server offers "Trace graph: NAME" as a code action on (and in)
;; every JAX entrypoint (`eglot-code-actions'), and this package runs it with its own prompts:
;; missing recipe inputs are read from the minibuffer, then it offers to save the profile.
;;
;; Commands:
;;   `jaxlsp-trace'           trace the entrypoint at point (or a chosen one)
;;   `jaxlsp-open-graph'      open the last trace's graph in the browser (`browse-url')
;;   `jaxlsp-outline'         a buffer of the trace's groups and nodes with shapes; RET on a group
;;                            expands it, on a node jumps to its source line
;;   `jaxlsp-node-at-point'   the traced operations on the current line, with their shapes
;;
;; eglot manages one server per project and mode: with `jaxlsp-setup', jaxlsp is the server of
;; Python buffers; `jaxlsp-start' switches one project to it without registering anything.

;;; Code:

(require 'cl-lib)
(require 'eglot)
(require 'jsonrpc)
(require 'project)
(require 'seq)
(require 'subr-x)

(defgroup jaxlsp nil
  "JAX graphs from the jaxlsp language server."
  :group 'tools
  :prefix "jaxlsp-")

(defcustom jaxlsp-command '("jaxlsp" "serve")
  "The server command: `jaxlsp' must be on the variable `exec-path'.
A command that runs \"python -m jaxlsp\" gets \"-I\" (isolated mode)."
  :type '(repeat string))

(defcustom jaxlsp-modes '(python-mode python-ts-mode)
  "Major modes whose buffers jaxlsp serves."
  :type '(repeat symbol))

(defcustom jaxlsp-trusted-directories nil
  "Directories (and those below) whose code jaxlsp may run for tracing.
t trusts every directory.  Otherwise the server asks before the first
trace in a folder."
  :type '(choice (const :tag "Ask" nil) (const :tag "Every directory" t) (repeat directory)))

(defcustom jaxlsp-python nil
  "The interpreter the capture runs in.
Default: the recipe's, else the workspace .venv, else the server's."
  :type '(choice (const nil) file))

(defcustom jaxlsp-timeout nil
  "Seconds before a capture is killed (default: the server's)."
  :type '(choice (const nil) number))

(defcustom jaxlsp-inlay-hints nil
  "Ask for shapes as inlay hints (shown by `eglot-inlay-hints-mode', eglot 1.11+)."
  :type 'boolean)

(defcustom jaxlsp-live-shapes t
  "Live shapes: re-trace what a file touches on open and save (trusted workspaces only).
nil sends liveShapes: false to the server."
  :type 'boolean)

(defcustom jaxlsp-request-timeout 600
  "Seconds to wait for a trace before giving up on the answer."
  :type 'number)

(defcustom jaxlsp-cursor-sync t
  "Send `jaxlsp/cursorMoved' when point rests, so an open graph view follows it."
  :type 'boolean)

(defclass jaxlsp-server (eglot-lsp-server) ()
  :documentation "The jaxlsp language server: initialization options and client-side commands.")

(defvar jaxlsp-last-trace nil
  "The last trace: a plist (:trace-id :name :uri :summary :server).")

(defvar jaxlsp-traces (make-hash-table :test #'equal)
  "The last trace per document URI, as in `jaxlsp-last-trace'.")

(defvar jaxlsp-after-trace-functions nil
  "Abnormal hook run with the trace plist after each successful trace.")

;;;; Registration

(defun jaxlsp--isolated (command)
  "COMMAND with \"-I\" after the interpreter when it runs \"-m jaxlsp\" without it.
eglot starts a server in the project's root, and Python run with -m puts
its current directory first on `sys.path': isolated mode (-I) does not."
  (let ((at (cl-loop for (a b) on command for i from 0
                     when (and (equal a "-m") (equal b "jaxlsp")) return i)))
    (if (and at (> at 0) (not (member "-I" (cl-subseq command 1 at))))
        (append (list (car command) "-I") (cdr command))
      command)))

(defun jaxlsp--inside-p (file directory)
  "Whether FILE is DIRECTORY or lies below it (links resolved)."
  (and file directory
       (string-prefix-p (file-name-as-directory (file-truename directory))
                        (file-name-as-directory (file-truename file)))))

(defun jaxlsp--program-inside (program root)
  "The path of PROGRAM when it lies inside ROOT (itself, a link's target or its #! interpreter)."
  (let ((found (and program root (executable-find program))))
    (when found
      (let ((interpreter (with-temp-buffer
                           (ignore-errors (insert-file-contents-literally found nil 0 256))
                           (goto-char (point-min))
                           (and (looking-at "#![ \t]*\\(/[^ \t\n]+\\)") (match-string 1)))))
        (when (or (jaxlsp--inside-p found root) (jaxlsp--inside-p interpreter root))
          found)))))

(defun jaxlsp--stored-trust-p (root)
  "Whether ROOT is below a folder trusted \"Always\" through the server's prompt.
That store is the user's, outside every workspace ($XDG_CONFIG_HOME/jaxlsp/trusted.json)."
  (let* ((base (or (getenv "XDG_CONFIG_HOME") (expand-file-name "~/.config")))
         (file (expand-file-name "jaxlsp/trusted.json" base))
         (data (ignore-errors
                 (with-temp-buffer
                   (insert-file-contents file)
                   (json-parse-buffer :object-type 'plist :array-type 'list)))))
    (cl-some (lambda (folder) (and (stringp folder) (jaxlsp--inside-p root folder)))
             (plist-get data :folders))))

(defun jaxlsp-contact (&optional _interactive)
  "The eglot contact for jaxlsp: the server class and `jaxlsp-command'.
A \"-m jaxlsp\" command runs isolated (-I); a command that lies inside an
untrusted project is refused, since starting it would run the project's code;
a command that is not installed is refused with the command that installs it."
  (let* ((command (jaxlsp--isolated jaxlsp-command))
         (project (project-current))
         (root (if project (project-root project) default-directory))
         (inside (jaxlsp--program-inside (car command) root)))
    (jaxlsp--server-installed (car command))
    (when (and inside (not (jaxlsp-trusted-p root)) (not (jaxlsp--stored-trust-p root)))
      (user-error "jaxlsp: not started for %s: the server command %s lies inside it, which is not trusted (its code would run before you decide); install jaxlsp outside it or add the folder to `jaxlsp-trusted-directories'"
                  root inside))
    (cons 'jaxlsp-server command)))

;;;###autoload
(defun jaxlsp-setup ()
  "Serve `jaxlsp-modes' buffers with jaxlsp through eglot.
Then `M-x eglot' or `eglot-ensure' starts it."
  (interactive)
  (setq eglot-server-programs (cl-remove #'jaxlsp-contact eglot-server-programs :key #'cdr))
  (push (cons jaxlsp-modes #'jaxlsp-contact) eglot-server-programs)
  (add-hook 'eglot-managed-mode-hook #'jaxlsp--managed))


;;;###autoload
(defun jaxlsp-start ()
  "Start jaxlsp for this buffer's project, in place of its Python server.
Unlike `jaxlsp-setup', this registers nothing: a later `M-x eglot' starts
your usual server again (eglot runs one server per project and mode)."
  (interactive)
  (add-hook 'eglot-managed-mode-hook #'jaxlsp--managed)
  (let ((eglot-server-programs (cons (cons jaxlsp-modes #'jaxlsp-contact) eglot-server-programs)))
    (apply #'eglot (append (eglot--guess-contact) (list (called-interactively-p 'any))))))

(defun jaxlsp-trusted-p (directory)
  "Whether DIRECTORY may run its code (`jaxlsp-trusted-directories')."
  (cond ((eq jaxlsp-trusted-directories t) t)
        ((null directory) nil)
        (t (let ((here (file-name-as-directory (file-truename directory))))
             (cl-some (lambda (dir) (string-prefix-p (file-name-as-directory (file-truename dir)) here))
                      jaxlsp-trusted-directories)))))

(defun jaxlsp--root (server)
  (let ((project (eglot--project server)))
    (and project (project-root project))))

(cl-defmethod eglot-initialization-options ((server jaxlsp-server))
  "`initializationOptions.jaxlsp' for SERVER.
Trust only for the directories the user listed."
  (let ((options (make-hash-table :test #'equal)))
    (when (jaxlsp-trusted-p (jaxlsp--root server))
      (puthash "trusted" t options))
    (when jaxlsp-python (puthash "python" jaxlsp-python options))
    (when jaxlsp-timeout (puthash "timeout" jaxlsp-timeout options))
    (when jaxlsp-inlay-hints (puthash "inlayHints" t options))
    (unless jaxlsp-live-shapes (puthash "liveShapes" :json-false options))
    (list :jaxlsp options)))

(cl-defmethod eglot-execute-command ((server jaxlsp-server) (_command (eql 'jaxlsp.traceGraph)) arguments)
  "Run the \"Trace graph\" code action of SERVER through `jaxlsp-trace'.
ARGUMENTS holds one {uri, name, profile?} object."
  (let ((arg (and (> (length arguments) 0) (aref arguments 0))))
    (jaxlsp-trace (plist-get arg :name)
                  :uri (plist-get arg :uri) :profile (plist-get arg :profile) :server server)))

(cl-defmethod eglot-client-capabilities :around ((_server jaxlsp-server))
  "eglot's capabilities, plus the jaxlsp opt-in `experimental.jaxlsp.openGraph': eglot takes no
window/showDocument, but this package opens the viewer's URL itself, so the server may offer
the \"Open graph\" code action."
  (let ((caps (cl-call-next-method)))
    (plist-put caps :experimental (list :jaxlsp (list :openGraph t)))))

(cl-defmethod eglot-execute-command ((server jaxlsp-server) (_command (eql 'jaxlsp.openGraph)) arguments)
  "Run the \"Open graph\" code action of SERVER: `jaxlsp/openGraph', then `browse-url'.
ARGUMENTS holds one {traceId} object.  eglot takes no window/showDocument, so the
server's own request to open the page never reaches Emacs: the URL is opened here."
  (let* ((arg (and (> (length arguments) 0) (aref arguments 0)))
         (url (plist-get (jsonrpc-request server :jaxlsp/openGraph (list :traceId (plist-get arg :traceId)))
                         :url)))
    (browse-url url)
    url))

;;;; Learning shapes

(defun jaxlsp--learned-message (result)
  "One line summing up RESULT, a LearnShapesResult."
  (let ((failures (plist-get result :failures)))
    (format "jaxlsp: learned the inputs of %d targets from %d examples in %.1f s%s"
            (or (plist-get result :learned) 0)
            (length (plist-get result :examples))
            (or (plist-get result :seconds) 0)
            (if (> (length failures) 0)
                (format "; %d failed (first: %s)" (length failures) (aref failures 0))
              ""))))

(defun jaxlsp-learn-shapes (&optional uri server)
  "Run the tests and documented scripts of this project once to learn shapes.
The server's `jaxlsp.learnShapes' on URI (default: the project root of SERVER,
the current buffer's jaxlsp server): the modules and helpers the tests reach get
inputs and live shapes.  Asynchronous (it can take minutes): eglot shows the
server's progress in the mode line, and a message sums it up.  Return the id of
the request."
  (interactive)
  (let* ((server (or server (jaxlsp--server)))
         (uri (or uri (eglot--path-to-uri (directory-file-name (expand-file-name (project-root (eglot--project server))))))))
    (message "jaxlsp: learning shapes from the project's tests...")
    (car (jsonrpc-async-request
          server :workspace/executeCommand
          (list :command "jaxlsp.learnShapes" :arguments (vector (list :uri uri)))
          :success-fn (lambda (result) (message "%s" (jaxlsp--learned-message result)))
          :error-fn (lambda (err) (message "jaxlsp: learning shapes: %s" (jaxlsp--error-text err)))
          :timeout-fn (lambda () (message "jaxlsp: learning shapes: no answer in time"))
          :timeout 1000))))

(cl-defmethod eglot-execute-command ((server jaxlsp-server) (_command (eql 'jaxlsp.learnShapes)) arguments)
  "Run the \"Learn shapes\" code action of SERVER through `jaxlsp-learn-shapes'.
Asynchronous: eglot's own request would wait, and time out, while the tests run.
ARGUMENTS holds one {uri} object."
  (let ((arg (and (> (length arguments) 0) (aref arguments 0))))
    (jaxlsp-learn-shapes (plist-get arg :uri) server)))

(cl-defmethod eglot-handle-notification ((_server jaxlsp-server) (_method (eql 'jaxlsp/traceFinished))
                                         &rest _params)
  "Ignore it: the trace's own answer reports it, a diagnostic marks a failure.")

;;;; Helpers

(defun jaxlsp--server ()
  "The jaxlsp server of the current buffer, or an error saying how to start one."
  (let ((server (eglot-current-server)))
    (unless (and server (object-of-class-p server 'jaxlsp-server))
      (user-error "No jaxlsp server here: call `jaxlsp-setup', then `M-x eglot' in a Python buffer"))
    server))

(defun jaxlsp--error-text (err)
  (or (plist-get err :message) (format "%S" err)))

(defun jaxlsp--uri ()
  (plist-get (eglot--TextDocumentIdentifier) :uri))

;;;; Tracing

(defun jaxlsp--entry-at-point (server &optional ask)
  "The name of the entrypoint around point, from `jaxlsp/discover' on SERVER.
With ASK, or when point is in none, choose one."
  (let* ((found (jsonrpc-request server :jaxlsp/discover (list :textDocument (eglot--TextDocumentIdentifier))))
         (entries (append (plist-get found :entrypoints) nil))
         (line (1- (line-number-at-pos)))
         (around (cl-remove-if-not
                  (lambda (e)
                    (let ((body (plist-get e :bodyRange)))
                      (<= (plist-get (plist-get body :start) :line) line
                          (plist-get (plist-get body :end) :line))))
                  entries)))
    (cond ((null entries) (user-error "jaxlsp: no JAX entrypoint in this file"))
          ((and around (not ask))
           (plist-get (car (last (cl-sort (copy-sequence around) #'<
                                          :key (lambda (e) (plist-get (plist-get (plist-get e :range) :start) :line)))))
                      :name))
          (t (completing-read "jaxlsp: trace which entrypoint? "
                              (mapcar (lambda (e) (plist-get e :name)) entries) nil t)))))

(defun jaxlsp--ask-inputs (result typed)
  "Read the needs-input items of RESULT that still need an answer.
TYPED is a hash table of what the user typed before, by item path: the
text is sent as typed, and the server parses it (the same rules in every
editor).  An item the server could not parse (RESULT's `errors') is read
again, starting from the text typed before, with the server's message.
Return TYPED, updated."
  (let ((errors (plist-get result :errors)))
    (seq-doseq (item (plist-get result :needsInput))
      (let* ((path (plist-get item :path))
             (problem (plist-get errors (intern (concat ":" path))))
             (before (gethash path typed)))
        (when (or problem (not before))
          (when problem (message "jaxlsp: %s: %s" path problem))
          (puthash path
                   (read-from-minibuffer
                    (format "jaxlsp: %s%s: " (or (plist-get item :message) path)
                            (if problem (format " [%s]" problem) ""))
                    before)
                   typed))))
    typed))

(defun jaxlsp--describe (result)
  (let ((summary (plist-get result :summary)))
    (format "%s ops, %s groups → %s (profile %s)"
            (plist-get summary :ops) (plist-get summary :groups)
            (string-join (append (plist-get summary :outputs) nil) ", ")
            (or (plist-get result :profile) "-"))))

(cl-defun jaxlsp-trace (&optional name &key uri profile server callback answers save)
  "Trace the entrypoint NAME: interactively, the one at point.
With a prefix argument, choose one.
Missing recipe inputs are read from the minibuffer (sent as typed: the
server parses them, and asks again with its message when one does not
parse), then the profile may be saved.  URI, PROFILE and SERVER default
to the current buffer's; CALLBACK gets (ERROR RESULT) when the trace is
done; ANSWERS (a hash table of typed text by path) and SAVE are sent as
`jaxlsp/trace' takes them."
  (interactive (list (jaxlsp--entry-at-point (jaxlsp--server) current-prefix-arg)))
  (let* ((server (or server (jaxlsp--server)))
         (uri (or uri (jaxlsp--uri)))
         (name (or name (jaxlsp--entry-at-point server)))
         (done (lambda (err result) (when callback (funcall callback err result))))
         (params (append (list :textDocument (list :uri uri) :name name)
                         (and profile (list :profile profile))
                         (and answers (list :answers answers :save (if save t :json-false))))))
    (message "jaxlsp: tracing %s…" name)
    (jsonrpc-async-request
     server :jaxlsp/trace params
     :timeout jaxlsp-request-timeout
     :success-fn
     (lambda (result)
       (if (plist-get result :needsInput)
           ;; Ask from a timer, not from the process filter that delivered the answer.
           (run-at-time 0 nil
                        (lambda ()
                          (condition-case err
                              (let* ((typed (jaxlsp--ask-inputs
                                             result (or answers (make-hash-table :test #'equal))))
                                     ;; Whether to save is asked once, with the first answers.
                                     (keep (if answers save
                                             (y-or-n-p (format "jaxlsp: save the profile for %s to jaxlsp.toml? "
                                                               name)))))
                                (jaxlsp-trace name :uri uri :profile profile :server server :callback callback
                                              :answers typed :save keep))
                            ((quit user-error)
                             (message "jaxlsp: trace cancelled: %s" (error-message-string err))
                             (funcall done (error-message-string err) nil)))))
         (let ((trace (list :trace-id (plist-get result :traceId) :name name :uri uri
                            :summary (plist-get result :summary) :server server)))
           (setq jaxlsp-last-trace trace)
           (puthash uri trace jaxlsp-traces)
           (message "jaxlsp: traced %s: %s%s" name (jaxlsp--describe result)
                    (if (stringp (plist-get result :saved))
                        (format "; saved the profile to %s" (eglot--uri-to-path (plist-get result :saved)))
                      ""))
           (run-hook-with-args 'jaxlsp-after-trace-functions trace)
           (funcall done nil result))))
     :error-fn
     (lambda (err)
       (message "jaxlsp: tracing %s: %s" name (jaxlsp--error-text err))
       (funcall done (jaxlsp--error-text err) nil))
     :timeout-fn
     (lambda ()
       (message "jaxlsp: tracing %s: no answer after %ss" name jaxlsp-request-timeout)
       (funcall done "timeout" nil)))))

(defun jaxlsp-current-trace ()
  "The current buffer's last trace, else the last one anywhere."
  (or (and buffer-file-name (gethash (jaxlsp--uri) jaxlsp-traces)) jaxlsp-last-trace
      (user-error "jaxlsp: nothing traced yet: M-x jaxlsp-trace (or the Trace graph code action)")))

;;;; Views

(defun jaxlsp-open-graph ()
  "Open the current trace's graph with `browse-url'; return the URL.
The URL comes from `jaxlsp/openGraph'."
  (interactive)
  (let* ((trace (jaxlsp-current-trace))
         (url (plist-get (jsonrpc-request (plist-get trace :server) :jaxlsp/openGraph
                                          (list :traceId (plist-get trace :trace-id)))
                         :url)))
    (browse-url url)
    url))

(defun jaxlsp--jump (server location)
  "Visit LOCATION (an LSP Location from SERVER), point at its start."
  (let* ((path (eglot--uri-to-path (plist-get location :uri)))
         (buffer (or (find-buffer-visiting path) (find-file-noselect path))))
    (pop-to-buffer buffer '((display-buffer-reuse-window display-buffer-use-some-window)))
    (ignore server)
    (goto-char (eglot--lsp-position-to-point (plist-get (plist-get location :range) :start)))))

(defun jaxlsp-reveal (server trace-id node-id)
  "Jump to the source of NODE-ID in TRACE-ID (`jaxlsp/revealSource' on SERVER).
eglot takes no window/showDocument: the jump is done here."
  (let ((result (jsonrpc-request server :jaxlsp/revealSource (list :traceId trace-id :nodeId node-id))))
    (jaxlsp--jump server (plist-get result :location))))

(defun jaxlsp--types (values)
  (mapconcat (lambda (v) (plist-get v :type)) (append values nil) ", "))

(defun jaxlsp-node-line (node)
  "One line for NODE, a `jaxlsp/node' answer.
For example `n12 dot_general(f32[3,4], f32[2,3]) → f32[2,4]'."
  (concat (format "%s %s(%s) → %s" (plist-get node :id) (plist-get node :primitive)
                  (jaxlsp--types (plist-get node :inputs)) (jaxlsp--types (plist-get node :outputs)))
          (let ((scope (plist-get node :scope)))
            (if (and (stringp scope) (not (string-empty-p scope))) (concat "  " scope) ""))))

(defun jaxlsp-node-at-point (&optional limit)
  "Show the traced operations on this line with their shapes.
At most LIMIT (default 20).  Returns the lines."
  (interactive)
  (let* ((server (jaxlsp--server))
         (found (jsonrpc-request server :jaxlsp/nodesAt (eglot--TextDocumentPositionParams)))
         (trace-id (plist-get found :traceId))
         (ids (append (plist-get found :nodeIds) nil))
         (limit (or limit 20)))
    (if (or (not (stringp trace-id)) (null ids))
        (progn (message "jaxlsp: no traced operation on this line") nil)
      (let ((lines (mapcar (lambda (id)
                             (jaxlsp-node-line
                              (jsonrpc-request server :jaxlsp/node (list :traceId trace-id :nodeId id))))
                           (seq-take ids limit))))
        (when (> (length ids) limit)
          (setq lines (append lines (list (format "… %d more" (- (length ids) limit))))))
        (message "jaxlsp: trace %s, line %d:\n%s" trace-id (line-number-at-pos) (string-join lines "\n"))
        lines))))

;;;; Outline

(defconst jaxlsp-outline-page 200 "Items per `jaxlsp/graph' page.")

(cl-defstruct (jaxlsp--entry (:constructor jaxlsp--entry-create))
  item expanded children more group cursor)

(defvar-local jaxlsp-outline--server nil)
(defvar-local jaxlsp-outline--trace-id nil)
(defvar-local jaxlsp-outline--name nil)
(defvar-local jaxlsp-outline--roots nil)

(defvar jaxlsp-outline-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "RET") #'jaxlsp-outline-activate)
    (define-key map (kbd "TAB") #'jaxlsp-outline-activate)
    map)
  "Keys of `jaxlsp-outline-mode'.")

(define-derived-mode jaxlsp-outline-mode special-mode "jaxlsp-outline"
  "A trace's groups and nodes with shapes.
RET expands a group, or jumps to a node's source."
  (setq truncate-lines t))

(defun jaxlsp-outline--load (list group cursor)
  "Append one page of GROUP (nil: the top level) from CURSOR to LIST.
Return the new list."
  (let* ((page (jsonrpc-request jaxlsp-outline--server :jaxlsp/graph
                                (append (list :traceId jaxlsp-outline--trace-id :limit jaxlsp-outline-page)
                                        (and group (list :group group))
                                        (and cursor (list :cursor cursor)))))
         (items (mapcar (lambda (item) (jaxlsp--entry-create :item item)) (plist-get page :items)))
         (next (plist-get page :nextCursor))
         (kept (cl-remove-if #'jaxlsp--entry-more list)))
    (append kept items (and (stringp next) (list (jaxlsp--entry-create :more t :group group :cursor next))))))

(defun jaxlsp-outline--text (entry)
  (let ((item (jaxlsp--entry-item entry)))
    (cond ((jaxlsp--entry-more entry) "… more (RET loads the next page)")
          ((equal (plist-get item :kind) "group")
           (let ((label (plist-get item :label)) (kind (plist-get item :groupKind)))
             (format "%s %s%s  (%d nodes)" (if (jaxlsp--entry-expanded entry) "▾" "▸") kind
                     (if (and label (not (equal label kind))) (concat " " label) "")
                     (or (plist-get (plist-get item :counts) :nodes) 0))))
          (t (let ((source (plist-get item :source)))
               (concat (format "  %s %s → %s" (plist-get item :id) (plist-get item :primitive)
                               (jaxlsp--types (plist-get item :outputs)))
                       (if (plist-get source :path)
                           (format "  %s:%d" (file-name-nondirectory (plist-get source :path))
                                   (plist-get source :line))
                         "")))))))

(defun jaxlsp-outline--render ()
  (let ((inhibit-read-only t) (line (line-number-at-pos)))
    (erase-buffer)
    (insert (format "jaxlsp · %s · trace %s\nRET expand / jump to source · q quit\n"
                    jaxlsp-outline--name jaxlsp-outline--trace-id))
    (cl-labels ((walk (entries depth)
                  (dolist (entry entries)
                    (insert (propertize (concat (make-string (* 2 depth) ?\s) (jaxlsp-outline--text entry))
                                        'jaxlsp-entry entry)
                            "\n")
                    (when (and (jaxlsp--entry-expanded entry) (jaxlsp--entry-children entry))
                      (walk (jaxlsp--entry-children entry) (1+ depth))))))
      (walk jaxlsp-outline--roots 0))
    (goto-char (point-min))
    (forward-line (1- line))))

(defun jaxlsp-outline--parent-list (entries group)
  "The children list of GROUP among ENTRIES (recursively), or nil."
  (cl-loop for entry in entries
           for item = (jaxlsp--entry-item entry)
           thereis (if (equal (plist-get item :id) group)
                       entry
                     (jaxlsp-outline--parent-list (jaxlsp--entry-children entry) group))))

(defun jaxlsp-outline-activate ()
  "RET: expand or collapse a group, load the next page, or jump to a node's source."
  (interactive)
  (let* ((entry (or (get-text-property (point) 'jaxlsp-entry) (user-error "Nothing on this line")))
         (item (jaxlsp--entry-item entry)))
    (cond
     ((jaxlsp--entry-more entry)
      (let ((owner (and (jaxlsp--entry-group entry)
                        (jaxlsp-outline--parent-list jaxlsp-outline--roots (jaxlsp--entry-group entry)))))
        (if owner
            (setf (jaxlsp--entry-children owner)
                  (jaxlsp-outline--load (jaxlsp--entry-children owner) (jaxlsp--entry-group entry)
                                        (jaxlsp--entry-cursor entry)))
          (setq jaxlsp-outline--roots
                (jaxlsp-outline--load jaxlsp-outline--roots nil (jaxlsp--entry-cursor entry))))
        (jaxlsp-outline--render)))
     ((equal (plist-get item :kind) "group")
      (setf (jaxlsp--entry-expanded entry) (not (jaxlsp--entry-expanded entry)))
      (when (and (jaxlsp--entry-expanded entry) (null (jaxlsp--entry-children entry)))
        (setf (jaxlsp--entry-children entry) (jaxlsp-outline--load nil (plist-get item :id) nil)))
      (jaxlsp-outline--render))
     (t (jaxlsp-reveal jaxlsp-outline--server jaxlsp-outline--trace-id (plist-get item :id))))))

(defun jaxlsp-outline ()
  "List the current trace's groups and nodes with shapes; return the buffer.
The levels come from `jaxlsp/graph'."
  (interactive)
  (let* ((trace (jaxlsp-current-trace))
         (buffer (get-buffer-create (format "*jaxlsp outline: %s*" (plist-get trace :name)))))
    (with-current-buffer buffer
      (jaxlsp-outline-mode)
      (setq jaxlsp-outline--server (plist-get trace :server)
            jaxlsp-outline--trace-id (plist-get trace :trace-id)
            jaxlsp-outline--name (plist-get trace :name)
            jaxlsp-outline--roots (jaxlsp-outline--load nil nil nil))
      (jaxlsp-outline--render))
    (pop-to-buffer buffer)
    buffer))

;;;; Cursor

(defvar-local jaxlsp--cursor-timer nil)
(defvar-local jaxlsp--cursor-last nil)

(defun jaxlsp--send-cursor (buffer)
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (let ((server (eglot-current-server)))
        (when (and server (object-of-class-p server 'jaxlsp-server) (jsonrpc-running-p server))
          (let ((params (eglot--TextDocumentPositionParams)))
            (unless (equal params jaxlsp--cursor-last)
              (setq jaxlsp--cursor-last params)
              (jsonrpc-notify server :jaxlsp/cursorMoved params))))))))

(defun jaxlsp--schedule-cursor ()
  "Send the position once point rests.
Cheap: one timer per buffer, one notification per stop."
  (when (timerp jaxlsp--cursor-timer)
    (cancel-timer jaxlsp--cursor-timer))
  (setq jaxlsp--cursor-timer (run-with-idle-timer 0.4 nil #'jaxlsp--send-cursor (current-buffer))))

(defun jaxlsp--managed ()
  "In buffers jaxlsp serves: follow point for the graph view; the first-run check."
  (let ((server (eglot-current-server)))
    (when (and eglot--managed-mode server (object-of-class-p server 'jaxlsp-server))
      (jaxlsp--check-capture server))
    (if (and eglot--managed-mode jaxlsp-cursor-sync server (object-of-class-p server 'jaxlsp-server))
        (add-hook 'post-command-hook #'jaxlsp--schedule-cursor nil t)
      (remove-hook 'post-command-hook #'jaxlsp--schedule-cursor t))))

;;;; First run (issue 48): one message naming what is missing and the command that fixes it

(defconst jaxlsp-install-command "pipx install jaxlsp (or: uv tool install jaxlsp)"
  "How to install the server: into its own environment, never the project's.")

(defun jaxlsp--server-installed (program)
  "Signal a `user-error' naming PROGRAM and the install command when it is not installed."
  (unless (or (null program) (executable-find program))
    (user-error "jaxlsp: the server \"%s\" is not on PATH (exec-path), so jaxlsp does not start.  Install it: %s; it needs Python >= 3.11, and the project environment needs only JAX"
                program jaxlsp-install-command)))

(defvar jaxlsp--checked-roots nil
  "Project roots whose capture interpreter was checked this session.")

(defun jaxlsp--check-capture (server)
  "Once per trusted root of SERVER: ask whether the capture interpreter can trace.
When it cannot, one message names it, what it lacks and the command that installs
it.  Untrusted roots are not checked: the check runs the project's interpreter."
  (let ((root (jaxlsp--root server)))
    (when (and root (not (member root jaxlsp--checked-roots))
               (or (jaxlsp-trusted-p root) (jaxlsp--stored-trust-p root)))
      (push root jaxlsp--checked-roots)
      (jsonrpc-async-request
       server :jaxlsp/environment (list :textDocument (list :uri (jaxlsp--uri)))
       :success-fn (lambda (result)
                     (when (eq (plist-get result :ok) :json-false)
                       (message "%s" (jaxlsp--first-run-message result))))
       :error-fn #'ignore
       :timeout-fn #'ignore
       :timeout 120))))

(defun jaxlsp--first-run-message (result)
  "The message for an environment RESULT that cannot trace."
  (let ((text (format "%s" (plist-get result :message)))
        (install (plist-get result :install)))
    (concat "jaxlsp: " text
            (if (and (stringp install) (not (string-empty-p install)))
                (concat (if (string-match-p "[.!]\\'" text) " " ". ") "To install it, run: " install)
              ""))))

(provide 'jaxlsp)
;;; jaxlsp.el ends here
